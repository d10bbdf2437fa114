-- Run-time and queueing-delay quantiles of GPU jobs at the probabilities $q (the CDF curves).
SELECT unnest(probabilities) AS cdf, unnest(run_q) AS run_s, unnest(queue_q) AS queue_s
FROM (
    SELECT
        $q AS probabilities,
        quantile_cont(run_s, $q) AS run_q,
        quantile_cont(queue_s, $q) AS queue_q
    FROM report_jobs($files, $paper)
    WHERE is_gpu
);
