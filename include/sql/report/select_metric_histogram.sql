-- A metric's daily fixed-bin histograms summed over the period (metrics_hist/... files).
SELECT bin_low, bin_high, sum(count) AS count
FROM read_parquet($files)
GROUP BY bin_low, bin_high
ORDER BY bin_low;
