-- Macros shared by the select_acmetrace_*_jobs queries: each returns NULL when the raw
-- value is fine (or empty) and a sentence naming the column and the problem otherwise.
CREATE OR REPLACE TEMP MACRO time_problem(raw_value, column_name) AS
    CASE
        WHEN raw_value IS NULL THEN NULL
        WHEN TRY_CAST(raw_value AS TIMESTAMPTZ) IS NULL
            THEN column_name || ' ''' || LEFT(raw_value, 40) || ''' is not a timestamp'
        WHEN NOT regexp_matches(TRIM(raw_value), '([+-][0-9]{2}(:?[0-9]{2})?|Z)$')
            THEN column_name || ' ''' || LEFT(raw_value, 40) || ''' has no UTC offset (naive timestamp)'
    END;

CREATE OR REPLACE TEMP MACRO number_problem(raw_value, column_name, kind) AS
    CASE
        WHEN raw_value IS NULL THEN NULL
        WHEN kind = 'integer' AND TRY_CAST(raw_value AS BIGINT) IS NULL
            THEN column_name || ' ''' || LEFT(raw_value, 40) || ''' is not an integer'
        WHEN kind = 'number' AND TRY_CAST(raw_value AS DOUBLE) IS NULL
            THEN column_name || ' ''' || LEFT(raw_value, 40) || ''' is not a number'
    END;
