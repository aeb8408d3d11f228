-- The submissions table's columns (state.connect adds the intake columns to older databases).
SELECT name FROM pragma_table_info('submissions')
