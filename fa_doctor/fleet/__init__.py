"""Fleet preflight: many node reports read as one (`merge`), and the fan-out that makes them (`fleet ray`)."""
