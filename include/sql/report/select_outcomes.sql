-- Final states of GPU jobs: count and GPU time per state and its outcome group.
SELECT
    state_group,
    state,
    count(*) AS jobs,
    COALESCE(sum(gpu_time), 0) AS gpu_time
FROM report_jobs($files, $paper)
WHERE is_gpu
GROUP BY state_group, state
ORDER BY state_group, state;
