-- Canonical job rows from an AcmeTrace Seren CSV. raw_jobs holds the file as DuckDB read it
-- (numbers typed by the reader, times as text; rows in file order).
-- Seren: Slurm ids, times with +08:00, duration = end - start, queue = start - submit,
-- gpu_time = gpu_num * duration (empty for CPU jobs).
-- Columns come out in the canonical order (acme.jobs.schema.JOB_COLUMNS) except state_group and
-- source_line, which the caller adds; problem says what could not be converted (such rows
-- go to quarantine, not to the lake, with record: the row as read, as JSON).
WITH parsed AS (
    SELECT
        *,
        parse_time(submit_time) AS submit_ts,
        parse_time(start_time) AS start_ts,
        parse_time(end_time) AS end_ts
    FROM raw_jobs
),
checked AS (
    SELECT
        $cluster::VARCHAR AS cluster,
        job_id,
        NULL::VARCHAR AS job_name,
        "user",
        "type" AS job_type,
        state,
        submit_ts AS submit_time,
        start_ts AS start_time,
        end_ts AS end_time,
        EPOCH(start_ts) - EPOCH(submit_ts) AS queue_s,
        EPOCH(end_ts) - EPOCH(start_ts) AS run_s,
        gpu_num,
        cpu_num,
        node_num,
        NULL::VARCHAR AS node_list,
        gpu_num * (EPOCH(end_ts) - EPOCH(start_ts)) AS gpu_time,
        NULL::BIGINT AS exit_code,
        'acmetrace' AS source,
        duration AS source_duration_s,
        gpu_time AS source_gpu_time,
        $source_file::VARCHAR AS source_file,
        NULLIF(CONCAT_WS('; ',
            CASE WHEN job_id IS NULL OR TRIM(job_id) = '' THEN 'job_id is empty' END,
            CASE WHEN submit_time IS NULL THEN 'submit_time is empty' END,
            time_problem(submit_time, submit_ts, 'submit_time'),
            time_problem(start_time, start_ts, 'start_time'),
            time_problem(end_time, end_ts, 'end_time')
        ), '') AS problem,
        struct_pack(
            job_id, "user", node_num, gpu_num, cpu_num, "type", state, submit_time, start_time, end_time, duration, "queue", gpu_time
        ) AS raw_row
    FROM parsed
)
SELECT
    * EXCLUDE (raw_row),
    CASE WHEN problem IS NOT NULL THEN to_json(raw_row)::VARCHAR END AS record
FROM checked
