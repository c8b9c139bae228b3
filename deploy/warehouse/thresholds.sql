-- The per-platform history `prober thresholds` computes, from the warehouse's rows
-- (`prober export`, table schema rows.schema.json), in BigQuery standard SQL.
--
--   bq query --use_legacy_sql=false --format=json \
--     --parameter=start:TIMESTAMP:2026-11-01T00:00:00Z \
--     --parameter=end:TIMESTAMP:2026-12-01T00:00:00Z \
--     < deploy/warehouse/thresholds.sql > result.json
--   prober thresholds --from-query-result result.json --out history/
--
-- The same rules as `prober thresholds` (prober/report/history/thresholds.py), so that both give
-- the same thresholds.json for the same runs (tests/report/test_warehouse.py):
-- - one value per run and LB x protocol x connection: the largest reaction over the run's
--   shutdown windows (0 when none was late, and a negative one as 0), only for runs that saw
--   a window; and the largest disruption seconds over the key's streams;
-- - a run loaded twice counts once;
-- - platform `all` pools every platform's runs, only when the range holds two platforms;
-- - PERCENTILE_CONT's definition (linear interpolation), the one origin's allowed values use.
-- Which keys have enough runs to be used (`--min-runs`) is decided by `prober thresholds`.
-- Runs are those that started in [@start, @end).

WITH
streams AS (
  SELECT DISTINCT
    run_id, LOWER(platform) AS platform, stream, lb, protocol, connection,
    disruption_seconds, windows
  FROM `prober.run_rows`
  WHERE row_type = 'stream' AND started >= @start AND started < @end
),
run_keys AS (
  SELECT
    run_id, platform, lb, protocol, connection,
    MAX(disruption_seconds) AS disruption, MAX(windows) AS windows
  FROM streams
  GROUP BY run_id, platform, lb, protocol, connection
),
reactions AS (
  SELECT run_id, lb, protocol, connection, MAX(reaction) AS reaction
  FROM `prober.run_rows`
  WHERE row_type = 'shutdown' AND started >= @start AND started < @end
  GROUP BY run_id, lb, protocol, connection
),
points AS (
  SELECT
    k.platform, k.lb, k.protocol, k.connection, 'reaction' AS metric,
    GREATEST(COALESCE(r.reaction, 0.0), 0.0) AS value
  FROM run_keys AS k
  LEFT JOIN reactions AS r
    ON r.run_id = k.run_id AND r.lb = k.lb AND r.protocol = k.protocol
    AND r.connection = k.connection
  WHERE k.windows > 0
  UNION ALL
  SELECT platform, lb, protocol, connection, 'disruption' AS metric, disruption AS value
  FROM run_keys
),
pooled AS (
  SELECT platform, lb, protocol, connection, metric, value FROM points
  UNION ALL
  SELECT 'all' AS platform, lb, protocol, connection, metric, value FROM points
  WHERE (SELECT COUNT(DISTINCT platform) FROM run_keys) >= 2
),
-- Each key's values in order, and where each percentile falls: PERCENTILE_CONT's linear
-- interpolation spelled out as prober computes it (prober/core/stats.py), so that BigQuery,
-- DuckDB and prober agree to the last bit; the engines' own PERCENTILE_CONT differ from one
-- another in the last bits (DuckDB interpolates in extended precision).
sorted_values AS (
  SELECT
    platform, lb, protocol, connection, metric,
    ARRAY_AGG(value ORDER BY value) AS v, COUNT(*) AS runs
  FROM pooled
  GROUP BY platform, lb, protocol, connection, metric
),
positions AS (
  SELECT
    platform, lb, protocol, connection, metric, v, runs,
    CAST(0.5 AS FLOAT64) * (runs - 1) AS x50,
    CAST(0.75 AS FLOAT64) * (runs - 1) AS x75,
    CAST(0.95 AS FLOAT64) * (runs - 1) AS x95,
    CAST(0.99 AS FLOAT64) * (runs - 1) AS x99
  FROM sorted_values
)
SELECT
  platform, lb, protocol, connection, metric,
  v[OFFSET(CAST(FLOOR(x50) AS INT64))] + (v[OFFSET(CAST(CEIL(x50) AS INT64))]
    - v[OFFSET(CAST(FLOOR(x50) AS INT64))]) * (x50 - FLOOR(x50)) AS p50,
  v[OFFSET(CAST(FLOOR(x75) AS INT64))] + (v[OFFSET(CAST(CEIL(x75) AS INT64))]
    - v[OFFSET(CAST(FLOOR(x75) AS INT64))]) * (x75 - FLOOR(x75)) AS p75,
  v[OFFSET(CAST(FLOOR(x95) AS INT64))] + (v[OFFSET(CAST(CEIL(x95) AS INT64))]
    - v[OFFSET(CAST(FLOOR(x95) AS INT64))]) * (x95 - FLOOR(x95)) AS p95,
  v[OFFSET(CAST(FLOOR(x99) AS INT64))] + (v[OFFSET(CAST(CEIL(x99) AS INT64))]
    - v[OFFSET(CAST(FLOOR(x99) AS INT64))]) * (x99 - FLOOR(x99)) AS p99,
  runs,
  @start AS period_start, @end AS period_end
FROM positions
ORDER BY platform, lb, protocol, connection, metric
