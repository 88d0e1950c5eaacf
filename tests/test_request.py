"""query/request.py's wire form: a request survives its trip through JSON whole.

`from_wire(json(to_wire(r))) == r` for every Search, Find and Count the
embedded API's keywords can build (hypothesis), as_of datetimes of every year
1..9999 and zone included; and the body's defaults stay off the wire.
"""
from __future__ import annotations

import datetime as dt

import msgspec
from hypothesis import given, settings, strategies as st

from varvedb.query.request import (MAX_RRF_K, RRF_K, WEIGHTS, Count, Find, Search,
                                   as_of_from_wire, as_of_to_wire)
from varvedb.schema import IVF_LIMITS, MAX_EF, QUERY_METRICS

names = st.text("abcdefgh_", min_size=1, max_size=6)
floats = st.floats(allow_nan=False, allow_infinity=False, width=32)
zones = st.integers(-14 * 60, 14 * 60).map(lambda m: dt.timezone(dt.timedelta(minutes=m)))
# a day's margin at both ends: every instant converts to UTC without leaving 1..9999
moments = st.builds(lambda d, tz: d.replace(tzinfo=tz),
                    st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30)), zones)
as_ofs = st.none() | st.integers(0, 2 ** 62) | moments
params = st.lists(st.none() | st.booleans() | st.integers(-2 ** 63, 2 ** 63 - 1) | floats
                  | st.text(max_size=8), max_size=4)
selects = st.none() | st.lists(names, max_size=3)
reads = {"where": st.none() | st.text(max_size=20), "params": params, "as_of": as_ofs,
         "branch": st.none() | names}


def _trip(request):
    """The request as the server reads it: to_wire, through JSON, from_wire."""
    body = msgspec.json.decode(msgspec.json.encode(request.to_wire()))
    return type(request).from_wire(body)


@st.composite
def searches(draw) -> Search:
    kw = {k: draw(v) for k, v in reads.items()}
    vector = st.lists(floats, min_size=1, max_size=6)
    legs = draw(st.sampled_from(["vector", "vector_text", "text", "hybrid", "rerank",
                                 "batch"]))
    if legs in ("vector", "hybrid"):
        kw["vector"] = draw(vector)
    if legs == "batch":
        dim = draw(st.integers(1, 6))
        kw["vectors"] = draw(st.lists(st.lists(floats, min_size=dim, max_size=dim),
                                      min_size=1, max_size=4))
    if legs == "vector_text":
        kw["vector_text"] = draw(st.text(max_size=10))
    if legs in ("text", "hybrid", "rerank"):
        kw["text"] = draw(st.text(max_size=10))
        kw["text_field"] = draw(st.none() | names)
    if legs == "rerank":
        kw["rerank"] = draw(vector)
    optional = {
        "limit": st.integers(0, 10 ** 6), "select": selects, "field": st.none() | names,
        "metric": st.none() | st.sampled_from(QUERY_METRICS),
        "ef": st.none() | st.integers(1, MAX_EF),
        "probes": st.none() | st.integers(1, IVF_LIMITS["lists"][1]),
        "exact": st.booleans(), "candidates": st.none() | st.integers(1, 10 ** 6),
        "rrf_k": st.integers(1, MAX_RRF_K),
        "weights": st.tuples(st.floats(0, 1e6), st.floats(0, 1e6)),
        "explain": st.booleans()}
    for name in draw(st.lists(st.sampled_from(sorted(optional)), unique=True)):
        kw[name] = draw(optional[name])
    return Search.of(**kw)


@settings(max_examples=300, deadline=None)
@given(searches())
def test_a_search_survives_the_wire(request):
    assert _trip(request) == request


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries(reads, optional={"limit": st.none() | st.integers(0, 10 ** 6),
                                              "select": selects}))
def test_a_find_survives_the_wire(kw):
    request = Find.of(**kw)
    assert _trip(request) == request


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries(reads))
def test_a_count_survives_the_wire(kw):
    request = Count.of(**kw)
    assert _trip(request) == request


@given(moments)
def test_an_as_of_moment_keeps_its_instant_and_its_four_digit_year(when):
    text = as_of_to_wire(when)
    assert text[4] == "-" and text.endswith("+00:00")
    assert as_of_from_wire(text) == when


def test_defaults_stay_off_the_wire_but_the_limit():
    assert Search.of(vector=[1.0, 2.0]).to_wire() == {"vector": [1.0, 2.0], "limit": 10}
    assert Search.of(text="a", rrf_k=RRF_K, weights=WEIGHTS).to_wire() == \
        {"text": "a", "limit": 10}
    assert Find.of().to_wire() == {} and Count.of().to_wire() == {}
    assert Find.of(select=[]).to_wire() == {"select": []}      # the id alone, not all
