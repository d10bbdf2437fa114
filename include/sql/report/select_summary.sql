-- One row with the columns of the paper's cluster summary (reference/cluster_summary.csv).
-- State shares are over finished GPU jobs (RUNNING has no outcome yet); GPU-time shares over
-- the GPU time of all GPU jobs (a running job has none).
SELECT
    count(*) AS job_num,
    count(*) FILTER (WHERE NOT is_gpu) AS cpu_job_num,
    count(*) FILTER (WHERE is_gpu) AS gpu_job_num,
    avg(run_s) FILTER (WHERE is_gpu) AS avg_run_time_gpu,
    avg(queue_s) FILTER (WHERE is_gpu) AS avg_que_time_gpu,
    avg(gpu_num) FILTER (WHERE is_gpu) AS avg_gpu_num,
    median(run_s) FILTER (WHERE is_gpu) AS med_run_time_gpu,
    median(queue_s) FILTER (WHERE is_gpu) AS med_que_time_gpu,
    median(gpu_num) FILTER (WHERE is_gpu) AS med_gpu_num,
    max(run_s) FILTER (WHERE is_gpu) AS max_run_time_gpu,
    max(gpu_num) FILTER (WHERE is_gpu) AS max_gpu,
    count(*) FILTER (WHERE is_gpu AND state_group = 'completed')
        / nullif(count(*) FILTER (WHERE is_gpu AND state_group <> 'running'), 0) AS complete_rate_gpu,
    count(*) FILTER (WHERE is_gpu AND state_group = 'cancelled')
        / nullif(count(*) FILTER (WHERE is_gpu AND state_group <> 'running'), 0) AS cancel_rate_gpu,
    count(*) FILTER (WHERE is_gpu AND state_group = 'failed')
        / nullif(count(*) FILTER (WHERE is_gpu AND state_group <> 'running'), 0) AS fail_rate_gpu,
    sum(gpu_time) FILTER (WHERE is_gpu AND state_group = 'completed') AS complete_gpu_time,
    sum(gpu_time) FILTER (WHERE is_gpu AND state_group = 'cancelled') AS cancel_gpu_time,
    sum(gpu_time) FILTER (WHERE is_gpu AND state_group = 'failed') AS fail_gpu_time,
    sum(gpu_time) FILTER (WHERE is_gpu AND state_group = 'completed')
        / nullif(sum(gpu_time) FILTER (WHERE is_gpu), 0) AS complete_rate_gpu_time,
    sum(gpu_time) FILTER (WHERE is_gpu AND state_group = 'cancelled')
        / nullif(sum(gpu_time) FILTER (WHERE is_gpu), 0) AS cancel_rate_gpu_time,
    sum(gpu_time) FILTER (WHERE is_gpu AND state_group = 'failed')
        / nullif(sum(gpu_time) FILTER (WHERE is_gpu), 0) AS fail_rate_gpu_time,
    avg(run_s) FILTER (WHERE NOT is_gpu) AS avg_run_time_cpu,
    avg(queue_s) FILTER (WHERE NOT is_gpu) AS avg_que_time_cpu,
    median(run_s) FILTER (WHERE NOT is_gpu) AS med_run_time_cpu,
    median(queue_s) FILTER (WHERE NOT is_gpu) AS med_que_time_cpu,
    count(*) FILTER (WHERE NOT is_gpu AND state_group = 'completed')
        / nullif(count(*) FILTER (WHERE NOT is_gpu AND state_group <> 'running'), 0) AS complete_rate_cpu,
    count(*) FILTER (WHERE NOT is_gpu AND state_group = 'cancelled')
        / nullif(count(*) FILTER (WHERE NOT is_gpu AND state_group <> 'running'), 0) AS cancel_rate_cpu,
    count(*) FILTER (WHERE NOT is_gpu AND state_group = 'failed')
        / nullif(count(*) FILTER (WHERE NOT is_gpu AND state_group <> 'running'), 0) AS fail_rate_cpu,
    count(*) FILTER (WHERE is_gpu AND gpu_num > 8) / nullif(count(*) FILTER (WHERE is_gpu), 0) AS share_gt8_gpus,
    sum(gpu_time) FILTER (WHERE is_gpu) / 3600.0 AS gpu_hours,
    min(submit_day) AS first_day,
    max(submit_day) AS last_day
FROM report_jobs($files, $paper);
