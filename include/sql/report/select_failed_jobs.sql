-- Failed jobs of the period (GPU and CPU): what the failure table's coverage is counted against.
SELECT count(*) AS failed_jobs
FROM report_jobs($files, $paper)
WHERE state_group = 'failed';
