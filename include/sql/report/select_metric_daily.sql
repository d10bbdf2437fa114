-- A metric per UTC day from its daily histograms (metrics_hist/.../date=<d>/hist.parquet):
-- the sample-weighted mean (bin midpoints) and the maximum (top edge of the highest non-empty
-- bin), both exact to one bin width; under- and overflow count at the histogram's edges.
-- Histograms are a few hundred rows a day whatever the number of GPUs, unlike the rollups.
WITH bins AS (
    SELECT
        CAST(regexp_extract(filename, 'date=(\d{4}-\d{2}-\d{2})', 1) AS DATE) AS day,
        CASE
            WHEN isinf(bin_low) THEN bin_high
            WHEN isinf(bin_high) THEN bin_low
            ELSE (bin_low + bin_high) / 2
        END AS value,
        CASE WHEN isinf(bin_high) THEN bin_low ELSE bin_high END AS top,
        "count"
    FROM read_parquet($files, filename = true)
)
SELECT
    day,
    sum(value * "count") / nullif(sum("count"), 0) AS mean,
    max(top) FILTER (WHERE "count" > 0) AS max,
    sum("count") AS samples
FROM bins
GROUP BY day
ORDER BY day;
