-- Per submit day and workload type: jobs and GPU-hours (trends across nights).
SELECT
    submit_day AS day,
    job_type,
    count(*) AS jobs,
    COALESCE(sum(gpu_time), 0) / 3600.0 AS gpu_hours
FROM report_jobs($files, $paper)
GROUP BY submit_day, job_type
ORDER BY day, job_type;
