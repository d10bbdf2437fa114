-- Macros shared by the select_acmetrace_*_jobs queries.

-- AcmeTrace writes times as 2023-03-01 00:18:22+08:00; a time without its UTC offset is
-- ambiguous and is not guessed.
CREATE OR REPLACE TEMP MACRO parse_time(raw_value) AS
    TRY_STRPTIME(raw_value, '%Y-%m-%d %H:%M:%S%z');

-- NULL when the raw time is empty or was parsed, else a sentence naming the column and the problem.
CREATE OR REPLACE TEMP MACRO time_problem(raw_value, parsed_value, column_name) AS
    CASE
        WHEN raw_value IS NULL OR parsed_value IS NOT NULL THEN NULL
        WHEN TRY_CAST(raw_value AS TIMESTAMP) IS NOT NULL
            THEN column_name || ' ''' || LEFT(raw_value, 40) || ''' has no UTC offset (naive timestamp)'
        ELSE column_name || ' ''' || LEFT(raw_value, 40) || ''' is not a timestamp'
    END;
