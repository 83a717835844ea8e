"""Fleet preflight: many node reports read as one (`fa-doctor merge`), and the fan-out that makes them on an
engine the cluster already runs (`fa-doctor fleet ray`).

`read.py` reads report files, folders and JSON Lines on stdin, bounded; `node.py` turns one hostile report into
a small typed summary or a refusal; `merge.py` groups the nodes by install fingerprint and finds the outliers;
`verdict.py` turns the fleet into the findings that decide the exit code; `ray.py` runs `check` on every alive
Ray node. The payload types are in `model.py`; the renderers in `fa_doctor/render/fleet/`.
"""
