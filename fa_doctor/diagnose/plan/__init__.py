"""The one remedy planner: checks and explain state intents (`intents.py`); `planner.plan` turns them into
typed actions for this machine, holding torch and the server's pins, after every check has run."""
