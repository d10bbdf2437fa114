-- Canonical job rows from a raw AcmeTrace Seren CSV (table raw_jobs: every column VARCHAR,
-- row_index = position among the rows DuckDB accepted).
-- Seren: Slurm ids, times with +08:00, duration = end - start, queue = start - submit,
-- gpu_time = gpu_num * duration (empty for CPU jobs).
-- problem lists what could not be parsed; such rows go to quarantine, not to the lake.
SELECT
    row_index,
    job_id,
    NULL::VARCHAR AS job_name,
    "user",
    "type" AS job_type,
    state,
    TRY_CAST(submit_time AS TIMESTAMPTZ) AS submit_time,
    TRY_CAST(start_time AS TIMESTAMPTZ) AS start_time,
    TRY_CAST(end_time AS TIMESTAMPTZ) AS end_time,
    TRY_CAST(gpu_num AS BIGINT) AS gpu_num,
    TRY_CAST(cpu_num AS BIGINT) AS cpu_num,
    TRY_CAST(node_num AS BIGINT) AS node_num,
    TRY_CAST(duration AS DOUBLE) AS source_duration_s,
    TRY_CAST(gpu_time AS DOUBLE) AS source_gpu_time,
    EPOCH(TRY_CAST(start_time AS TIMESTAMPTZ)) - EPOCH(TRY_CAST(submit_time AS TIMESTAMPTZ)) AS queue_s,
    EPOCH(TRY_CAST(end_time AS TIMESTAMPTZ)) - EPOCH(TRY_CAST(start_time AS TIMESTAMPTZ)) AS run_s,
    NULLIF(CONCAT_WS('; ',
        CASE WHEN job_id IS NULL OR TRIM(job_id) = '' THEN 'job_id is empty' END,
        CASE WHEN submit_time IS NULL THEN 'submit_time is empty' END,
        time_problem(submit_time, 'submit_time'),
        time_problem(start_time, 'start_time'),
        time_problem(end_time, 'end_time'),
        number_problem(gpu_num, 'gpu_num', 'integer'),
        number_problem(cpu_num, 'cpu_num', 'integer'),
        number_problem(node_num, 'node_num', 'integer'),
        number_problem(duration, 'duration', 'number'),
        number_problem("queue", 'queue', 'number'),
        number_problem(gpu_time, 'gpu_time', 'number')
    ), '') AS problem
FROM raw_jobs
