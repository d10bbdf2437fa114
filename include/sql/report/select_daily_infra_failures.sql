-- Per submit day: failed jobs diagnosed with an infrastructure root cause (and all diagnosed).
SELECT
    j.submit_day AS day,
    count(*) FILTER (WHERE d.category = 'Infrastructure') AS infra_failures,
    count(*) AS diagnosed_failures
FROM report_jobs($files, $paper) AS j
JOIN report_diagnoses($diagnoses) AS d ON d.cluster = j.cluster AND d.job_id = j.job_id
WHERE j.state_group = 'failed'
GROUP BY j.submit_day
ORDER BY day;
