-- The paper's Table 3 over this report's jobs: per diagnosed reason, the failed jobs, their share
-- of the diagnosed failures' GPU time, time to failure (run time until the failure) and GPUs.
WITH failed AS (
    SELECT j.job_id, j.run_s, j.gpu_num, COALESCE(j.gpu_time, 0) AS gpu_time, d.reason, d.category
    FROM report_jobs($files, $paper) AS j
    JOIN report_diagnoses($diagnoses) AS d ON d.cluster = j.cluster AND d.job_id = j.job_id
    WHERE j.state_group = 'failed'
)
SELECT
    category,
    reason,
    count(*) AS jobs,
    count(*) / sum(count(*)) OVER () AS job_share,
    sum(gpu_time) AS gpu_time,
    sum(gpu_time) / nullif(sum(sum(gpu_time)) OVER (), 0) AS gpu_time_share,
    median(run_s) AS med_time_to_failure_s,
    avg(run_s) AS avg_time_to_failure_s,
    median(gpu_num) AS med_gpu_num,
    avg(gpu_num) AS avg_gpu_num
FROM failed
GROUP BY category, reason
ORDER BY category, gpu_time DESC, jobs DESC, reason;
