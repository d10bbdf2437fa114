-- The canonical jobs of a report, with the run-time definition the report uses.
--   files: the job partitions of the period (jobs/cluster=<c>/date=<d>/jobs.parquet)
--   paper: true = the paper-compatible definition: the source's own duration and GPU time where
--          it has them (AcmeTrace Kalos `duration` = end - submit, so it includes queueing);
--          false = the true run time end - start (run_s) and GPUs * run_s.
-- GPU counts are the physical GPUs held: gpu_share (a MIG slice, a vGPU share, a fraction) where
-- set, else gpu_num. A job without a submit time (a sacct export without Submit) has a null
-- queue_s, so the queueing statistics (avg, median, quantiles: nulls ignored) leave it out; its
-- day is that of its start (else end). A job with no time at all (a sacct export whose only time
-- is Elapsed, ingested with --day) has that day's partition (date=<d> of its file) as its day; its
-- run_s is Elapsed. Partitions written before gpu_share existed lack the column: the empty UNION
-- BY NAME below supplies it as null.
CREATE OR REPLACE TEMP MACRO report_jobs(files, paper) AS TABLE
SELECT
    cluster,
    job_id,
    job_type,
    state,
    state_group,
    submit_time,
    COALESCE(
        CAST(COALESCE(submit_time, start_time, end_time) AS DATE),
        TRY_CAST(regexp_extract(filename, 'date=(\d{4}-\d{2}-\d{2})', 1) AS DATE)
    ) AS submit_day,
    COALESCE(gpu_share, gpu_num, 0) AS gpu_num,
    COALESCE(gpu_num, 0) > 0 AS is_gpu,
    queue_s,
    CASE WHEN paper THEN COALESCE(source_duration_s, run_s) ELSE run_s END AS run_s,
    CASE WHEN paper THEN COALESCE(source_gpu_time, gpu_time) ELSE gpu_time END AS gpu_time
FROM (
    SELECT * FROM read_parquet(files, union_by_name = true, filename = true)
    UNION ALL BY NAME
    SELECT CAST(NULL AS DOUBLE) AS gpu_share WHERE false
);

-- Diagnosis records, one per job: the newest wins when a job was diagnosed more than once.
CREATE OR REPLACE TEMP MACRO report_diagnoses(files) AS TABLE
SELECT cluster, CAST(job_id AS VARCHAR) AS job_id, reason, category, confidence, source, rule_id
FROM read_parquet(files, union_by_name = true)
QUALIFY row_number() OVER (PARTITION BY cluster, job_id ORDER BY diagnosed_at DESC, rule_id) = 1;
