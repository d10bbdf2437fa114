-- GPU jobs and their GPU time per requested GPU count (CDFs weighted by count and by GPU time).
SELECT
    gpu_num,
    count(*) AS jobs,
    COALESCE(sum(gpu_time), 0) AS gpu_time
FROM report_jobs($files, $paper)
WHERE is_gpu
GROUP BY gpu_num
ORDER BY gpu_num;
