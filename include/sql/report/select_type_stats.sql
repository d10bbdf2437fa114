-- Per workload type of GPU jobs: shares by count and GPU time, demand, duration and queueing.
SELECT
    job_type,
    count(*) AS jobs,
    count(*) / sum(count(*)) OVER () AS job_share,
    COALESCE(sum(gpu_time), 0) AS gpu_time,
    COALESCE(sum(gpu_time), 0) / nullif(sum(sum(gpu_time)) OVER (), 0) AS gpu_time_share,
    avg(gpu_num) AS avg_gpu_num,
    median(gpu_num) AS med_gpu_num,
    median(run_s) AS med_run_s,
    avg(run_s) AS avg_run_s,
    median(queue_s) AS med_queue_s,
    avg(queue_s) AS avg_queue_s,
    quantile_cont(queue_s, 0.9) AS p90_queue_s,
    count(*) FILTER (WHERE state_group = 'failed')
        / nullif(count(*) FILTER (WHERE state_group <> 'running'), 0) AS fail_rate
FROM report_jobs($files, $paper)
WHERE is_gpu
GROUP BY job_type
ORDER BY gpu_time DESC, jobs DESC, job_type;
