"""Collectives against the interconnect: a row whose launches carry bus bytes (comm_bytes,
analysis.readers.collectives) is judged against the link's bandwidth a direction, the bound nccl-tests' bus
bandwidth is compared with (its doc/PERFORMANCE.md): time at the roof = bus bytes / link bandwidth. This
module imports nothing of analysis.roofline (which calls it), so it takes the roofs' link as an argument."""

from __future__ import annotations

import math
from collections.abc import Mapping

COMMUNICATION_BOUND = "communication"  # the `bound` of a collective placed on the link; its `roof` and `level`
LINK = "link"
NO_MESSAGE_SIZE = ("a collective whose message size the profile does not record (a torch trace records it with "
                   "record_shapes=True; torch >= 2.1 on record_param_comms)")
NO_LINK = ("no interconnect roof for this GPU: ceilings/data/serving.csv gives the link of the datasheet rows "
           "with a cited figure")


def judge_link(row: dict, k: Mapping, link) -> str | None:
    """Fill the roof columns of `row` for a collective of k["comm_bytes"] bus bytes against `link` (a
    Roof, or None); return why it cannot be judged, or None."""
    if link is None:
        return NO_LINK
    time, nbytes = k["time_s"], k["comm_bytes"]
    if math.isnan(time) or time <= 0:
        return "no kernel time"
    at = nbytes / link.value
    row.update(level=LINK, roof=LINK, bound=COMMUNICATION_BOUND, bytes=nbytes, bytes_kind="bus", time_at_roof_s=at,
               judged_time_s=time, pct_of_roof=100.0 * at / time, time_saved_s=max(0.0, time - at))
    return None


def link_warning(rows: int, link) -> str:
    from ceilings.report import format_rate

    return (f"{rows} collective row(s) judged against {link.ceiling}, {format_rate(link.value, 'B/s')}: their "
            f"bus bytes (nccl-tests' factors) over their time; a group that spans nodes runs at the network's "
            f"rate, below the link's, so its % of roof is low for that reason")
