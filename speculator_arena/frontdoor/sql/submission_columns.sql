-- The submissions table's columns (state.connect adds the intake and artifact columns to older databases).
SELECT name FROM pragma_table_info('submissions')
