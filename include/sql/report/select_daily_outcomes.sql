-- Per submit day, over GPU jobs: median and mean queueing delay and the failure rate.
SELECT
    submit_day AS day,
    count(*) AS gpu_jobs,
    median(queue_s) AS med_queue_s,
    avg(queue_s) AS avg_queue_s,
    count(*) FILTER (WHERE state_group = 'failed')
        / nullif(count(*) FILTER (WHERE state_group <> 'running'), 0) AS fail_rate
FROM report_jobs($files, $paper)
WHERE is_gpu
GROUP BY submit_day
ORDER BY day;
