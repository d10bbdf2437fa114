-- The canonical jobs of a report, with the run-time definition the report uses.
--   files: the job partitions of the period (jobs/cluster=<c>/date=<d>/jobs.parquet)
--   paper: true = the paper-compatible definition: the source's own duration and GPU time where
--          it has them (AcmeTrace Kalos `duration` = end - submit, so it includes queueing);
--          false = the true run time end - start (run_s) and gpu_num * run_s.
CREATE OR REPLACE TEMP MACRO report_jobs(files, paper) AS TABLE
SELECT
    cluster,
    job_id,
    job_type,
    state,
    state_group,
    submit_time,
    CAST(submit_time AS DATE) AS submit_day,
    COALESCE(gpu_num, 0) AS gpu_num,
    COALESCE(gpu_num, 0) > 0 AS is_gpu,
    queue_s,
    CASE WHEN paper THEN COALESCE(source_duration_s, run_s) ELSE run_s END AS run_s,
    CASE WHEN paper THEN COALESCE(source_gpu_time, gpu_time) ELSE gpu_time END AS gpu_time
FROM read_parquet(files);

-- Diagnosis records, one per job: the newest wins when a job was diagnosed more than once.
CREATE OR REPLACE TEMP MACRO report_diagnoses(files) AS TABLE
SELECT cluster, CAST(job_id AS VARCHAR) AS job_id, reason, category, confidence, source, rule_id
FROM read_parquet(files, union_by_name = true)
QUALIFY row_number() OVER (PARTITION BY cluster, job_id ORDER BY diagnosed_at DESC, rule_id) = 1;
