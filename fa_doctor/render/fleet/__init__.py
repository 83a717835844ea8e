"""The fleet report's renderers, one per format (registered in `render/base.py` as `PAYLOAD_MODULES`): a result
whose payload is a `FleetPayload` is rendered by these, whatever renderer was asked for the format."""
