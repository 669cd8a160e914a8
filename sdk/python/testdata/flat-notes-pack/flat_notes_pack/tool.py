"""Note formatting; uses tinydep, installed in .deps."""

import pthdep
import tinydep


def format_note(title: str, body: str = "", **kwargs) -> dict:
    return {"slug": tinydep.slugify(title), "body": body.strip(), "extra": sorted(kwargs),
            "via_pth": pthdep.NAME}


def run(title: str = "", **kwargs) -> dict:
    """Default entrypoint."""
    return format_note(title, **kwargs)
