"""The lowering tests' harness (tests/helpers/lowering_harness.py) itself."""
import numpy as np

from tests.helpers.lowering_harness import check


def test_harness_round_trips_every_dtype():
    """The harness itself: identity and a copy through compiled code keep values bit for bit."""
    for dt in ["float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint64", "uint32",
               "uint16", "uint8", "bool"]:
        x = (np.arange(12).reshape(3, 4) % 3).astype(dt)
        check(lambda a, s: (a, s), x, np.asarray(x[1, 2]))
