"""What leaves traceq besides the report: the named tables (``tables``) that ``traceq sql`` queries,
the SQLite file that holds them (``sqlite``), and the annotated Chrome trace that Perfetto opens
(``chrome``)."""
