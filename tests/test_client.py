"""vv.Client and vv.AsyncClient against a real `varvedb serve` (tests/server_proc.py).

One server for the module, with a token; each test starts by dropping every
collection (the server's versions advance across tests, so a test that needs
version 1 to be its first gets a fresh server of its own). The embedded API's
own test cases run here through the client where they apply (APPLIED below;
EXCUSED names the rest and why).
"""
from __future__ import annotations

import asyncio
import datetime as dt
import http.client
import os
import socket
import ssl
import struct
import subprocess
import threading
import time

import msgspec
import numpy as np
import pytest

import varvedb as vv
import test_api
import test_collection_verbs
import test_tabular
import test_text_search
import test_upsert_merge
import test_vector_search
from test_vector_search import ds  # noqa: F401  (a fixture of the cases run here)
from conftest import PYTHON, child_env, counts, file_digest
from server_proc import ServerProcess, free_port
from varvedb import demo_data, wire
from varvedb.query.plan import PlanNode, VectorTopK
from varvedb.reports import VacuumReport
from varvedb.results import Hit, Hits, SqlResult
from varvedb.storage.backup import BackupInfo
from varvedb_bench.data import exact_topk, recall

TOKEN = "test-token-0123"
UTC = dt.timezone.utc
SLOW = 120      # seconds: a server's first query of a kind may compile its kernel (cold cache)


def _client(url: str) -> vv.Client:
    return vv.Client(url, token=TOKEN, timeout=SLOW)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("served") / "served.varve")
    with ServerProcess(path, token=TOKEN, env=child_env()) as srv:
        yield srv


@pytest.fixture
def client(server):
    c = _client(server.url)
    for name in c.collections():
        c.drop_collection(name)
    for b in c.branches()[1:]:       # main first: a case's branches go with it
        c.drop_branch(b.name)
    yield c
    c.close()


@pytest.fixture
def db(client):
    """The embedded tests' `db`: a Client on the module's server, emptied."""
    return client


@pytest.fixture
def db_path(server, client, monkeypatch):
    """The embedded tests' `db_path`: the served file; vv.connect(it) is a new
    Client on the server (so a close and a connect again is a reconnect)."""
    monkeypatch.setattr(vv, "connect", lambda path, **kw: _client(server.url))
    return server.path


def _fresh_client(tmp_path):
    srv = ServerProcess(str(tmp_path / "fresh.varve"), token=TOKEN, env=child_env()).start()
    return srv, _client(srv.url)


# ---- the embedded API's cases, through the client ------------------------------------

filtered = test_api.filtered          # a fixture over `db`

APPLIED = {
    test_api: [
        "test_insert_then_get_returns_every_field_as_written",
        "test_missing_fields_read_back_as_null", "test_get_of_unknown_id_is_none",
        "test_insert_without_ids_assigns_fresh_increasing_ids",
        "test_upsert_merges_into_live_document_and_inserts_new_one",
        "test_update_sets_fields_on_matching_rows_and_keeps_the_rest",
        "test_delete_by_ids_and_by_filter_returns_counts",
        "test_insert_arrays_matches_insert_of_the_same_rows",
        "test_insert_arrays_without_ids_assigns_them",
        "test_find_returns_insertion_order_with_limit_and_select",
        "test_text_ids_insert_get_filter_and_auto_assign",
        "test_closed_database_raises_closed_error",
        "test_collection_lookup_and_duplicate_name",
        "test_filter_answers_match_hand_worked_sql",
        "test_vector_fields_filter_only_by_null_test",
        "test_filter_parameters_bind_by_position",
        "test_update_and_delete_where_use_parameters",
        "test_timestamp_fields_filter_by_datetime_and_iso_string",
        "test_search_scores_equal_pgvector_operators",
        "test_cosine_distance_to_a_zero_vector_is_one",
        "test_search_skips_rows_with_null_vectors_and_respects_limit",
        "test_search_select_returns_chosen_fields",
        "test_as_of_version_sees_each_past_state",
        "test_as_of_outside_history_raises_version_not_found",
        "test_collection_history_lists_versions_of_one_document",
        # Client.transaction(): a transaction the server holds across requests
        "test_transaction_makes_several_writes_one_version",
        "test_exception_in_transaction_rolls_every_write_back",
        "test_collection_created_in_rolled_back_transaction_is_gone",
        "test_nested_transaction_raises_transaction_error",
        "test_json_path_filter_forgets_rows_a_rollback_removed",
        "test_a_write_that_changes_nothing_makes_no_version",
        # db.checkpoint() on the server's file; close and connect again is a reconnect
        "test_hash_and_sorted_indexes_answer_like_a_scan",
        "test_checkpoint_then_reopen_shows_identical_state_at_every_version",
        "test_reopen_without_checkpoint_replays_the_log",
    ],
    test_text_search: [
        "test_bm25_scores_equal_the_reference_on_a_small_corpus",
        "test_text_queries_travel_in_time",
        "test_reopen_without_a_checkpoint_replays_into_the_same_index",
        "test_phrase_prefix_or_not_and_parentheses",
        "test_a_malformed_query_is_a_typed_error_and_changes_nothing",
        "test_stemming_accents_and_cjk",
        "test_a_filtered_text_query_is_never_short_of_k",
        "test_at_at_in_a_filter_is_the_text_match_with_sql_nulls",
        "test_search_argument_errors",
        "test_a_rolled_back_transaction_leaves_no_postings",
        # Collection.explain: plan objects built from the server's plan
        "test_hybrid_fuses_the_two_rankings_by_reciprocal_rank",
    ],
    test_collection_verbs: [
        "test_exist_ok_returns_the_collection_of_the_same_schema",
        "test_exist_ok_refuses_another_schema_naming_the_difference",
        "test_get_of_many_ids_answers_their_documents_in_their_order",
        "test_get_of_many_ids_travels_in_time",
        "test_get_of_many_text_ids",
        "test_find_offset_skips_rows_before_the_limit",
        "test_search_of_a_batch_of_vectors_equals_each_search",
        "test_search_of_a_batch_refuses_a_wrong_batch_whole",
        "test_a_collection_created_from_rows_takes_its_types_and_ids_from_them",
        "test_get_or_create_from_rows_inserts_once",
        "test_a_collection_from_data_that_fails_is_not_created",
        "test_a_table_infers_the_schema_its_rows_do",
    ],
    test_tabular: [
        "test_insert_table_equals_dicts", "test_upsert_table_merges_and_replace_replaces",
        "test_wrong_column_type_names_it_and_writes_nothing", "test_hits_to_tables",
        "test_an_arrow_json_column_reads_as_values_and_bad_text_is_refused",
        "test_lists_of_several_lengths_go_to_the_field",
        "test_json_fields_of_other_shapes_come_out_as_they_went_in",
    ],
    test_upsert_merge: [
        "test_upsert_merges_the_fields_a_row_names_and_keeps_the_rest",
        "test_replace_and_merge_false_replace_the_whole_document",
        "test_a_failed_upsert_changes_nothing",
        "test_as_of_an_earlier_version_shows_the_document_before_the_merge",
        "test_a_merged_document_is_found_by_its_kept_vector_and_text",
    ],
}
for _module, _names in APPLIED.items():
    for _name in _names:
        globals()[_name] = getattr(_module, _name)

# run on a fresh server each: they count versions from 1
FRESH = ["test_as_of_datetime_picks_last_version_committed_at_or_before_it",
         "test_database_history_lists_every_commit_with_distinct_chain"]

# the client's hits.plan is the server's only with explain=True (a search's answer
# stays lean); these read hits.plan of searches that do not ask for it
PLAN = "hits.plan of a search without explain=True (the client's is None)"
EXCUSED = {
    test_api: {
        "test_memory_database_supports_the_same_api": "a :memory: database",
        "test_readonly_connection_refuses_every_write_and_leaves_the_file_alone":
            "read-only connections (the server's --readonly is its own contract)",
        "test_readonly_connection_of_missing_file_fails_without_creating_it":
            "read-only connections",
        "test_every_durability_mode_keeps_commits_across_reopen": "connect's options, reopen",
        "test_close_releases_the_write_lock_while_arrays_from_the_file_live_on":
            "the engine's arrays in this process, and the file's lock held by it",
    },
    test_text_search: {
        "test_statistics_stay_exact_through_inserts_updates_and_deletes":
            "two databases in one test (a rebuilt twin in a second file)",
        "test_checkpoint_and_reopen_answer_the_same_without_analyzing_again":
            "a read-only reopen with this process's analyzer patched to fail: over HTTP "
            "the analyzer that runs is the server's, so the check would hold vacuously",
        "test_rerank_orders_the_text_candidates_by_exact_distance": PLAN,
        "test_vectors_are_filled_from_their_source_text":
            "an embedder registered in the test's process, which the server's lacks",
        "test_sql_match_bm25_snippet_highlight_and_rrf":
            "an embedder registered in the test's process, and SqlResult.plan",
        "test_varvedb_search_command": "the `varvedb search` command on a file",
    },
    test_collection_verbs: {
        "test_get_of_many_ids_matches_an_oracle":
            "hypothesis over :memory: databases (the same verbs are held above)",
        "test_inferred_types_are_the_values_types_and_the_rows_read_back":
            "hypothesis over files of its own (create from rows is held above)",
        "test_async_create_from_rows": "the embedded async API (tests/test_async_database.py)",
        "test_a_collection_from_data_that_fails_in_a_transaction_leaves_nothing":
            "db.transaction() over files and :memory: (the client's transactions: "
            "tests/test_server_transactions.py)",
        "test_a_creation_undone_after_its_frames_were_written": "the engine's own undo",
    },
    test_upsert_merge: {
        "test_the_graph_and_the_text_index_answer_a_merged_document": PLAN,
        "test_a_new_source_text_is_embedded_again_and_a_kept_one_keeps_its_vector":
            "an embedder registered in the test's process, which the server's lacks",
        "test_writes_match_a_dict_of_dicts_oracle":
            "hypothesis over :memory: databases (the same verbs are held above)",
    },
    test_tabular: {
        "test_text_ids_and_nulls_from_a_table": "pandas' nullable Int64 through JSON rows: "
                                                "the same columns are held above",
        "test_sql_result_to_polars": "db.sql's SqlResult (the client's is the same class)",
        "test_number_and_vector_columns_are_taken_without_a_copy":
            "frame_columns alone, no database (the client sends the columns as JSON)",
        "test_json_of_any_shape_comes_out_of_every_table_as_it_went_in":
            "hypothesis over :memory: databases (the same conversions are held above)",
        "test_import_varvedb_loads_no_frame_library": "a fresh interpreter, no database",
    },
    test_vector_search: {
        **{name: PLAN for name in ("test_recall_at_defaults_is_at_least_095",
                                   "test_filtered_search_keeps_recall_and_never_returns_short",
                                   "test_search_as_of_an_earlier_version_walks_the_graph_"
                                   "through_dead_rows", "test_exact_flag_and_ef_are_honoured")},
        "test_results_identical_after_close_and_reopen":
            "the engine's graph of a reopened file (c.table.vector_indexes)",
        "test_bulk_built_graph_holds_no_spare_rows": "the engine's graph (c.table)",
        "test_searches_run_while_a_writer_inserts": "the engine's graph at the end (c.table)",
        "test_create_index_rejects_bad_specs_and_leaves_the_file_unchanged":
            "a file of its own, compared byte for byte: through the client in "
            "test_index_verbs_and_their_bad_inputs",
    },
}

# cases on a file of their own (tmp_path): run here with vv.connect(path) a Client on
# the module's server; their `indexed` is this module's (loaded through the client)
ON_THE_SERVER = {
    test_upsert_merge: ["test_a_merge_on_a_branch_leaves_main_and_get_of_ids_reads_either"],
    test_vector_search: ["test_delete_every_row_then_insert_new_ones_finds_them",
                         "test_rows_committed_after_the_graph_are_found_before_and_after_linking"],
}


def test_every_embedded_case_is_run_or_excused():
    for module in (test_api, test_collection_verbs, test_text_search, test_upsert_merge,
                   test_vector_search, test_tabular):
        names = {n for n in dir(module) if n.startswith("test_")}
        lists = [set(APPLIED.get(module, ())), set(EXCUSED[module]),
                 set(ON_THE_SERVER.get(module, ())), set(FRESH) if module is test_api else set()]
        covered = set().union(*lists)
        assert names == covered, names ^ covered
        assert sum(map(len, lists)) == len(covered), "a case is listed twice"


ON_THE_SERVER_CASES = [(m, n) for m, names in ON_THE_SERVER.items() for n in names]


@pytest.fixture
def indexed(server, client, ds):  # noqa: F811
    """test_vector_search's `indexed`, loaded through the client: (path, db, items)."""
    db = _client(server.url)
    c = db.create_collection("items", {"tag": vv.Int(index="sorted"),
                                       "emb": vv.Vector(test_vector_search.DIM, metric="l2")})
    c.insert_arrays(id=ds.ids, tag=ds.tags, emb=ds.vectors)
    c.create_index("emb", vv.HNSW(m=16, ef_construction=200))
    assert c.wait_indexed(timeout=1800), c.index_status()      # a hang guard
    yield server.path, db, c
    db.close()


@pytest.mark.parametrize("module,name", ON_THE_SERVER_CASES,
                         ids=[n for _, n in ON_THE_SERVER_CASES])
def test_cases_on_a_file_of_their_own_through_the_client(request, server, client, monkeypatch,
                                                         module, name):
    import inspect
    case = getattr(module, name)
    args = {p: request.getfixturevalue(p) for p in inspect.signature(case).parameters}
    monkeypatch.setattr(vv, "connect", lambda path, **kw: _client(server.url))
    case(**args)


@pytest.mark.parametrize("name", FRESH)
def test_version_counting_cases_on_a_fresh_server(tmp_path, name):
    srv, c = _fresh_client(tmp_path)
    try:
        getattr(test_api, name)(c)
    finally:
        c.close()
        srv.stop()


# ---- the client's own contract -----------------------------------------------------------

def _docs(c, name="docs"):
    d = c.create_collection(name, {"title": "text", "tag": vv.Int(index="hash"),
                                   "body": vv.Text(fts=True), "ts": "timestamp",
                                   "emb": vv.Vector(3, metric="l2")})
    d.insert([{"id": i, "title": f"t{i}", "tag": i % 3, "body": f"apple w{i}",
               "ts": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(hours=i),
               "emb": [i, 0, 1]} for i in range(10)])
    return d


def test_results_have_the_embedded_types(client):
    d = _docs(client)
    hits = d.search(vector=np.array([2, 0, 1], np.float32), limit=3, select=["ts", "emb"])
    assert isinstance(hits, vv.Hits) and all(isinstance(h, vv.Hit) for h in hits)
    assert hits.ids == [2, 1, 3] and hits.plan is None
    assert hits[0]["ts"] == dt.datetime(2024, 1, 1, 2, tzinfo=UTC)
    assert hits[0]["emb"].dtype == np.float32 and hits[0]["emb"].tolist() == [2, 0, 1]
    explained = d.search(vector=[2, 0, 1], limit=3, explain=True)
    assert explained.ids == hits.ids and "VectorTopK" in str(explained.plan)
    assert isinstance(explained.plan, PlanNode)
    assert explained.plan == d.explain("search", vector=[2, 0, 1], limit=3) or \
        explained.plan.find(VectorTopK).strategy == "exact"
    assert d.get(4, select=[]) == {"id": 4}
    assert d.get(4, select=["tag"]) == {"id": 4, "tag": 1}
    r = client.sql("SELECT id, ts, emb FROM docs WHERE id = $1", [3])
    assert isinstance(r, SqlResult) and r.columns == ["id", "ts", "emb"]
    (i, ts, emb), = r.rows
    assert i == 3 and ts == dt.datetime(2024, 1, 1, 3, tzinfo=UTC)
    assert emb.dtype == np.float32 and emb.tolist() == [3, 0, 1]
    h = client.history()
    assert all(isinstance(v, vv.VersionInfo) and v.timestamp.tzinfo for v in h)
    assert h[-1].version == client.version
    rep = client.verify()
    assert isinstance(rep, vv.VerifyReport) and rep.ok and rep.chain == h[-1].chain
    bad = client.verify(anchor=(h[-1].version, h[0].chain))
    assert not bad.ok and bad.first_break.version == h[-1].version
    assert len(d) == 10 and d.schema.fields["emb"].dim == 3


def test_a_schema_of_field_objects_arrives_whole(client):
    spec = {"id": "text", "n": vv.Int(index="sorted", default=5, not_null=True),
            "when": vv.Timestamp(default=dt.datetime(2020, 1, 1, tzinfo=UTC)),
            "body": vv.Text(fts=True, stem="english", k1=1.5), "tag": "int",
            "emb": vv.Vector(4, metric="dot", dtype="f16", index=vv.HNSW(m=8, ef_search=50)),
            "meta": vv.Json(default={"a": 1}), "title": "vector(2)"}
    d = client.create_collection("rich", spec)
    twin = vv.connect(":memory:")
    assert d.schema == twin.create_collection("rich", spec).schema
    assert client["rich"].schema == d.schema
    twin.close()
    d.insert({"id": "a", "body": "running", "emb": [1, 2, 3, 4]})
    doc = d.get("a")
    assert doc["n"] == 5 and doc["when"] == dt.datetime(2020, 1, 1, tzinfo=UTC)
    assert doc["meta"] == {"a": 1} and doc["emb"].dtype == np.float32
    assert d.search(text="run").ids == ["a"]


def test_a_field_added_elsewhere_is_fetched_and_decoded(client):
    d = _docs(client)
    client.sql("ALTER TABLE docs ADD COLUMN seen timestamptz")      # not through `d`
    when = dt.datetime(2025, 5, 5, 5, 5, 5, 5, tzinfo=UTC)
    client["docs"].update({"seen": when}, ids=[3])
    assert "seen" not in d.schema.fields
    assert d.get(3)["seen"] == when                 # the description fetched again
    assert "seen" in d.schema.fields and d.schema.fields["seen"].kind == "timestamp"
    assert d.find("id = 3", select=["seen"])[0]["seen"] == when
    assert d.history(3)[-1]["doc"]["seen"] == when


def test_get_ids_answers_the_servers_fields_not_a_stale_schema(server, client):
    """get(ids=[...]) without select is every field the server has now, as get(id)
    and the embedded API answer: one another client added (a vector, decoded) is
    there, one it dropped is gone (it was an UnknownFieldError)."""
    a = client.create_collection("docs", {"n": "int"})
    a.insert({"id": 1, "n": 1})
    with _client(server.url) as other:
        b = other.collection("docs")
        b.add_field("emb", vv.Vector(2))
        b.add_field("z", "text")
        b.update({"z": "hello", "emb": [1.0, 2.0]}, ids=[1])
        got, = a.get(ids=[1])
        assert got.pop("emb").tolist() == [1.0, 2.0] and got == {"id": 1, "n": 1, "z": "hello"}
        b.drop_field("n")
    got, = a.get(ids=[1])
    assert list(got) == ["id", "emb", "z"] and a.get(1).keys() == got.keys()
    assert a.get(ids=[1], select=["z"]) == [{"id": 1, "z": "hello"}]


def test_search_batch_answers_each_query_in_order(client):
    d = _docs(client)
    batch = d.search_batch([{"vector": [1, 0, 1], "limit": 2},
                            {"text": "w7", "limit": 5},
                            {"vector": [9, 0, 1], "where": "tag = $1", "params": [0],
                             "limit": 1}])
    assert [b.ids for b in batch] == [[1, 0], [7], [9]]
    assert [b.ids for b in batch] == [d.search(vector=[1, 0, 1], limit=2).ids,
                                     d.search(text="w7", limit=5).ids,
                                     d.search(vector=[9, 0, 1], where="tag = $1",
                                              params=[0], limit=1).ids]
    v = client.version
    with pytest.raises(vv.DimensionError):       # one bad query fails the batch
        d.search_batch([{"vector": [1, 0, 1]}, {"vector": [1, 0]}])
    with pytest.raises(vv.OptionError):
        d.search_batch([{"vectr": [1, 0, 1]}])
    assert client.version == v


def test_numpy_query_vectors_go_binary_and_answer_as_json_ones(client):
    """search(vectors=) and a search_batch of numpy vectors alike send the block as
    .npy and read msgpack (client._batch_request); the hits, types included, are
    the JSON batch's."""
    from varvedb.client import _one_batch
    d = _docs(client)
    qs = np.array([[1, 0, 1], [9, 0, 1], [4, 0, 1]], np.float32)
    args = {"limit": 2, "where": "tag >= $1", "params": [1], "select": ["ts", "emb", "tag"]}
    as_json = d.search_batch([{"vector": q.tolist(), **args} for q in qs])
    binary = [{"vector": q, **args} for q in qs]
    assert _one_batch(binary) is not None
    assert _one_batch(binary[:1] + [{"vector": qs[1], "limit": 3}]) is None    # not alike
    for got in (d.search_batch(binary), d.search(vectors=qs, **args)):
        assert [b.ids for b in got] == [b.ids for b in as_json] == [[1, 2], [8, 7], [4, 5]]
        for b, want in zip(got, as_json):
            assert [h.score for h in b] == [h.score for h in want]
            assert all(h["ts"] == w["ts"] and h["ts"].tzinfo is not None and
                       h["emb"].dtype == np.float32 and h["emb"].tolist() == w["emb"].tolist()
                       for h, w in zip(b, want))
    with pytest.raises(vv.DimensionError):       # the server's check, typed
        d.search(vectors=np.ones((2, 4), np.float32))


@pytest.mark.parametrize("bulk", ["arrow", "npy", "json"])
def test_insert_arrays_in_each_body_form(client, bulk):
    client._bulk = bulk
    d = client.create_collection("bulk", {"emb": vv.Vector(4, metric="l2"), "tag": "int"})
    X = np.random.default_rng(5).normal(size=(300, 4)).astype(np.float32)
    ids = d.insert_arrays(emb=X)             # one vector column, no ids: .npy's case
    assert len(ids) == 300 and d.count() == 300
    got = np.stack([d.get(int(i))["emb"] for i in ids[:5]])
    np.testing.assert_array_equal(got, X[:5])
    more = d.insert_arrays(id=np.arange(1000, 1010), emb=X[:10], tag=np.arange(10))
    assert more.tolist() == list(range(1000, 1010))
    assert d.get(1004)["tag"] == 4
    v = client.version
    with pytest.raises(vv.DimensionError):
        d.insert_arrays(emb=X[:, :3])
    with pytest.raises(vv.FieldTypeError):     # checked before anything is sent
        d.insert_arrays(emb=X[:3], tag=[1, 2])
    with pytest.raises(vv.UnknownFieldError):
        d.insert_arrays(nope=[1, 2])
    assert client.version == v and d.count() == 310


@pytest.mark.parametrize("bulk", ["auto", "arrow", "npy", "json"])
def test_insert_arrays_with_null_or_ragged_vectors_answers_as_embedded(client, tmp_path, bulk):
    """A vector column holding None stores NULL, one of mixed widths is the
    embedded DimensionError, in every body form (it was a raw ValueError)."""
    client._bulk = bulk
    with vv.connect(str(tmp_path / "e.varve")) as emb:
        for db in (emb, client):
            v = db.create_collection("v", {"x": vv.Vector(2)})
            assert list(v.insert_arrays(x=[[1, 2], None])) == [1, 2]
            got = v.get(ids=[1, 2])
            assert got[0]["x"].tolist() == [1.0, 2.0] and got[1] == {"id": 2, "x": None}
            with pytest.raises(vv.DimensionError):
                v.insert_arrays(x=[[1, 2], [1, 2, 3]])
            assert v.count() == 2


@pytest.mark.parametrize("bulk", ["arrow", "json"])
def test_insert_arrays_of_every_kind_reads_back_as_insert_does(client, bulk):
    client._bulk = bulk
    spec = {"id": "text", "tag": "int", "score": "float", "flag": "bool", "title": "text",
            "ts": "timestamp", "meta": "json", "emb": vv.Vector(2)}
    a, b = client.create_collection("a", spec), client.create_collection("b", spec)
    base = dt.datetime(2024, 1, 1, tzinfo=UTC)
    ids = ["x:1", "y 2", "é3", "4?&#%"]
    cols = {"tag": np.arange(4), "score": np.linspace(0, 1, 4), "flag": [True, False, True, None],
            "title": ["a", None, "c", "d"], "ts": [base + dt.timedelta(days=i) for i in range(4)],
            "emb": np.eye(4, 2, dtype=np.float32)}
    got = a.insert_arrays(id=ids, **cols)
    assert got == ids
    b.insert([{"id": i, **{k: (v[n].item() if isinstance(v, np.ndarray) and v.ndim == 1
                              else v[n]) for k, v in cols.items()}}
              for n, i in enumerate(ids)])
    a.insert_arrays(id=["j"], meta=[{"k": [1, 2]}])        # json: always JSON rows
    b.insert({"id": "j", "meta": {"k": [1, 2]}})
    for i in ids + ["j"]:
        da, dbb = a.get(i), b.get(i)
        ea, eb = da.pop("emb"), dbb.pop("emb")
        assert (ea is None and eb is None) or ea.tolist() == eb.tolist()
        assert da == dbb and da["id"] == i
        assert [e["doc"]["id"] for e in a.history(i)] == [i]
    assert a.get("x:1")["ts"] == base and a.get("nope") is None


def test_an_id_holding_a_slash_is_one_path_segment(client):
    d = client.create_collection("urls", {"id": "text", "n": "int"})
    d.insert([{"id": "https://example.org/a", "n": 1}, {"id": "a/history", "n": 2},
              {"id": "a", "n": 3}])
    assert d.get("https://example.org/a") == {"id": "https://example.org/a", "n": 1}
    assert [e["doc"]["n"] for e in d.history("https://example.org/a")] == [1]
    # an id ending in /history is an item, not the history of "a"
    assert d.get("a/history") == {"id": "a/history", "n": 2}
    assert [e["doc"]["n"] for e in d.history("a")] == [3]
    assert d.update({"n": 10}, ids=["https://example.org/a"]) == 1
    assert d.delete(ids=["a/history"]) == 1
    assert d.get("a/history") is None and d.get("https://example.org/a")["n"] == 10


NAN, INF = float("nan"), float("inf")


def _same_floats(got, want) -> bool:
    """Equal, a NaN equal to a NaN (what the embedded API stores, the client reads)."""
    return np.array_equal(np.asarray(got, float), np.asarray(want, float), equal_nan=True)


@pytest.mark.parametrize("bulk", ["arrow", "npy", "json"])
def test_non_finite_floats_travel_both_ways_as_the_embedded_api_takes_them(client, tmp_path,
                                                                         bulk):
    """NaN and +-inf in a float field are stored and served as they are (JSON's
    bare NaN / Infinity tokens), in every body and answer; what the embedded API
    refuses (a NaN in a json field or a vector) is refused with its error."""
    client._bulk = bulk
    emb = vv.connect(str(tmp_path / "e.varve"))
    sides = {}
    for side, db in (("embedded", emb), ("client", client)):
        d = db.create_collection("nan", {"x": "float", "j": "json", "v": vv.Vector(2)})
        d.insert([{"id": 1, "x": NAN}, {"id": 2, "x": INF}, {"id": 3, "x": -INF},
                  {"id": 4, "x": None}])
        d.insert_arrays(id=[5, 6], x=np.array([NAN, -INF]))
        assert d.update({"x": INF}, ids=[4]) == 1
        with pytest.raises(vv.FieldTypeError, match="NaN"):
            d.insert({"id": 9, "j": {"a": NAN}})
        with pytest.raises(vv.NonFiniteVectorError):
            d.insert({"id": 9, "v": [NAN, 1.0]})
        with pytest.raises(vv.NonFiniteVectorError):
            d.insert_arrays(v=np.array([[1.0, 2.0], [INF, 0.0]], np.float32))
        with pytest.raises(vv.NonFiniteVectorError):
            d.search(vector=[NAN, 1.0])
        sides[side] = (
            [r["x"] for r in d.get(ids=[1, 2, 3, 4, 5, 6])], d.get(1)["x"],
            [h["x"] for h in d.find()], d.count(where="x IS NULL"),
            d.count(where="x = $1", params=[INF]), d.count(where="x = $1", params=[-INF]),
            db.sql("SELECT x, $1::float8 FROM nan ORDER BY id", [NAN]).rows,
            db.sql("SELECT 'NaN'::float8, '-Infinity'::float8").rows,
            [e["doc"]["x"] for e in d.history(4)])
    want, got = sides["embedded"], sides["client"]
    assert want[0][:4] == [want[0][0], INF, -INF, INF] and np.isnan(want[0][0])
    for w, g in zip(want, got):
        if isinstance(w, list) and w and isinstance(w[0], tuple):
            w, g = [list(r) for r in w], [list(r) for r in g]
        assert _same_floats(g, w), (g, w)
    assert got[3] == want[3] == 0 and got[4] == want[4] == 2 and got[5] == want[5] == 2
    emb.close()


def test_the_wire_form_marks_non_finite_floats_and_nothing_else():
    # finite, but its msgpack bytes look like a non-finite one to the scan: walked
    # for nothing, and written as msgspec writes it
    lookalike = struct.unpack(">d", bytes([0x40, 0xcb, 0x7f, 0xf1, 0, 0, 0, 0]))[0]
    plain = [lookalike, None, "NaN", "null", 1.5, {"a": [2, None]}]
    assert wire.encode(plain) == msgspec.json.encode(plain)
    odd = {"hits": Hits([Hit(1, None, {"x": NAN, "v": np.array([1.0, -INF], np.float32),
                                       "y": np.float64(INF)})]), "t": (-INF, None)}
    out = wire.encode(odd)
    assert out == (b'{"hits":[{"id":1,"score":null,"fields":{"x":NaN,"v":[1.0,-Infinity],'
                   b'"y":Infinity}}],"t":[-Infinity,null]}')
    back = wire.loads(out)
    assert np.isnan(back["hits"][0]["fields"]["x"]) and back["t"] == [-INF, None]
    only_in_an_array = {"v": np.array([1.0, NAN]), "n": None}
    assert wire.encode(only_in_an_array) == b'{"v":[1.0,NaN],"n":null}'
    with pytest.raises(vv.RequestError):          # out of range stays malformed
        wire.decode(b"[NaN, 1e400]")


def test_a_file_the_embedded_api_wrote_serves_its_non_finite_floats(tmp_path):
    path = str(tmp_path / "e.varve")
    with vv.connect(path) as db:
        db.create_collection("t", {"x": "float"}).insert(
            [{"id": 1, "x": NAN}, {"id": 2, "x": INF}, {"id": 3, "x": None}])
    with ServerProcess(path, token=TOKEN, env=child_env()) as srv, _client(srv.url) as c:
        t = c.collection("t")
        assert _same_floats([r["x"] for r in t.get(ids=[1, 2])], [NAN, INF])
        assert t.get(3)["x"] is None and t.count(where="x IS NULL") == 1


def _state(c, d):
    return c.version, d.count(), c.history()[-1].chain


def test_typed_errors_with_their_status_and_nothing_changes(client, server):
    d = _docs(client)
    before = _state(client, d)
    digest = file_digest(server.path)
    cases = [
        (lambda: d.insert([{"id": 50, "emb": [1, 2, 3]}, {"id": 51, "emb": [1, 2]}]),
         vv.DimensionError, 422),
        (lambda: d.insert([{"id": 50}, {"id": 3}]), vv.DuplicateIdError, 409),
        (lambda: d.update({"tag": "x"}, ids=[1]), vv.FieldTypeError, 422),
        (lambda: d.insert({"nope": 1}), vv.UnknownFieldError, 422),
        (lambda: d.find("tag ==== 1"), vv.FilterError, 400),
        (lambda: d.delete(where="tag = $2", params=[1]), vv.FilterError, 400),
        (lambda: d.search(text='"unclosed'), vv.QuerySyntaxError, 400),
        (lambda: client.sql("SELEC 1"), vv.SqlError, 400),
        (lambda: client.sql("SELECT nope FROM docs"), vv.SqlError, 400),
        (lambda: client.collection("nope"), vv.NotFoundError, 404),
        (lambda: d.count(as_of=10**9), vv.VersionNotFoundError, 404),
        (lambda: d.search(vector=[1, 2, 3], metric="hamming"), vv.OptionError, 400),
    ]
    for call, cls, status in cases:
        with pytest.raises(cls) as e:
            call()
        assert type(e.value) is cls and e.value.http_status == status, (cls, e.value)
        assert _state(client, d) == before, cls
    # the same error as the embedded API's: class, message, position, sqlstate
    twin_db = vv.connect(":memory:")
    twin = _docs(twin_db)
    for call in (lambda c, db: c.search(text="apple OR"),
                 lambda c, db: c.find("body @@ '(apple'"),
                 lambda c, db: db.sql("SELECT id FROM docs WHERE"),
                 lambda c, db: db.sql("SELECT nope FROM docs")):
        with pytest.raises(vv.VarveError) as want:
            call(twin, twin_db)
        with pytest.raises(vv.VarveError) as got:
            call(d, client)
        assert (type(got.value), str(got.value), got.value.sqlstate) == \
            (type(want.value), str(want.value), want.value.sqlstate)
        assert getattr(got.value, "position", None) == getattr(want.value, "position", None)
    twin_db.close()
    assert file_digest(server.path) == digest
    client.drop_collection("docs")
    with pytest.raises(vv.NotFoundError):         # a collection dropped under its handle
        d.count()
    assert client.version == before[0] + 1


def test_a_wrong_or_missing_token_is_refused_and_health_is_open(client, server):
    d = _docs(client)
    before = _state(client, d)
    for token in ("wrong", None):
        other = vv.Client(server.url, token=token)
        with pytest.raises(vv.AuthenticationError) as e:
            other.collections()
        assert e.value.http_status == 401
        with pytest.raises(vv.AuthenticationError):
            other["docs"]
        with pytest.raises(vv.AuthenticationError):
            vv.Client(server.url, token=token).sql("DROP TABLE docs")
        assert other.version == before[0]          # GET /health needs no token
        other.close()
    assert _state(client, d) == before


def test_an_unreachable_server_is_server_unavailable(client):
    c = vv.Client(f"http://127.0.0.1:{free_port()}", token=TOKEN, timeout=2)
    with pytest.raises(vv.ServerUnavailableError) as e:
        c.collections()
    assert isinstance(e.value, ConnectionError) and "127.0.0.1" in str(e.value)
    c.close()
    client.close()
    with pytest.raises(vv.ClosedError):
        client.collections()


def _sock(c):
    return c._transport._local.conn.sock


def test_one_thread_reuses_one_connection(client):
    d = _docs(client)
    d.count()
    sock = _sock(client)
    port = sock.getsockname()[1]
    for i in range(100):
        assert d.get(i % 10)["id"] == i % 10
        d.upsert({"id": 100, "tag": i})        # writes too
    assert _sock(client) is sock and sock.getsockname()[1] == port


def test_a_forked_child_opens_its_own_connection(client):
    assert client.collections() == []
    port = _sock(client).getsockname()[1]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:        # the child: the parent's socket must not be shared
        try:
            ok = client.collections() == [] and _sock(client).getsockname()[1] != port
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    answer = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert client.collections() == [] and _sock(client).getsockname()[1] == port


def test_eight_threads_get_correct_answers_on_their_own_connections(client):
    d = client.create_collection("par", {"tag": "int", "emb": vv.Vector(8, metric="l2")})
    X = np.random.default_rng(2).normal(size=(500, 8)).astype(np.float32)
    d.insert_arrays(id=np.arange(500), tag=np.arange(500) % 5, emb=X)
    Q = np.random.default_rng(3).normal(size=(8, 30, 8)).astype(np.float32)
    want = [[np.argsort(((X - q) ** 2).sum(1), kind="stable")[:5].tolist() for q in qs]
            for qs in Q]
    got, socks, errors = [None] * 8, [None] * 8, []

    def work(t):
        try:
            got[t] = [d.search(vector=q, limit=5, exact=True).ids for q in Q[t]]
            socks[t] = _sock(client)
        except Exception as e:       # reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert got == want
    assert len({id(s) for s in socks}) == 8


class MisbehavingServer:
    """A real TCP server that answers the first request on each connection and,
    on the second, reads it and hangs up without answering: a kept-alive
    connection lost while a request is out."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.requests: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        f = conn.makefile("rb")
        for n in range(2):
            line = f.readline()
            if not line:
                break
            length = 0
            while (h := f.readline()) not in (b"\r\n", b""):
                if h.lower().startswith(b"content-length:"):
                    length = int(h.split(b":")[1])
            f.read(length)
            self.requests.append(line.split()[0].decode())
            if n == 0:
                body = b'{"status": "ok", "version": 7, "collections": []}'
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        f.close()
        conn.close()

    def close(self):
        self.sock.close()


def test_a_lost_connection_retries_reads_once_and_never_resends_writes():
    srv = MisbehavingServer()
    c = vv.Client(f"http://127.0.0.1:{srv.port}")
    try:
        assert c.version == 7                  # connection 1, request 1
        assert c.version == 7                  # request 2 lost: asked again on connection 2
        assert srv.requests == ["GET", "GET", "GET"]
        with pytest.raises(vv.ServerUnavailableError, match="may or may not"):
            c.drop_collection("x")             # a write lost after it was sent
        assert srv.requests == ["GET", "GET", "GET", "DELETE"]
        assert c.collections() == []           # a new connection for the next one
    finally:
        c.close()
        srv.close()


def test_a_restarted_server_is_reached_again_without_losing_a_write(client, server):
    d = _docs(client)
    client.sql("SELECT 1")
    server.restart()           # every kept-alive connection is now closed
    d.insert({"id": 77, "tag": 1})      # the dead connection is found before sending
    assert d.get(77)["tag"] == 1 and d.count() == 11
    assert client.verify().ok


def test_sigkill_during_ingest_keeps_every_acknowledged_batch(tmp_path):
    srv, c = _fresh_client(tmp_path)
    try:
        d = c.create_collection("ingest", {"emb": vv.Vector(8)})
        acked, failed = [], []
        X = np.random.default_rng(9).normal(size=(200, 8)).astype(np.float32)

        def ingest():
            for b in range(10_000):
                try:
                    d.insert_arrays(id=np.arange(b * 200, (b + 1) * 200), emb=X)
                except vv.ServerUnavailableError as e:
                    failed.append(str(e))
                    return
                acked.append(b)
        t = threading.Thread(target=ingest)
        t.start()
        deadline = time.monotonic() + SLOW
        while len(acked) < 5 and time.monotonic() < deadline:
            time.sleep(0.002)
        srv.kill()
        t.join()
        assert failed and ("may or may not" in failed[0] or "cannot reach" in failed[0])
        srv.start()
        c2 = _client(srv.url)
        got = c2["ingest"]
        n = got.count()
        assert n >= 200 * len(acked) and n % 200 == 0       # a batch is whole or absent
        assert all(got.get(b * 200 + 7) is not None for b in acked)
        assert c2.verify().ok
        c2.close()
    finally:
        c.close()
        srv.stop()


def test_hnsw_recall_through_the_client(client):
    ds = demo_data.make(2000, 16, 20, seed=4)
    d = client.create_collection("items", {"tag": "int", "emb": vv.Vector(16, metric="l2")})
    d.insert_arrays(id=ds.ids, tag=ds.tags, emb=ds.vectors)
    client.sql("CREATE INDEX ON items USING hnsw (emb vector_l2_ops)")
    truth = exact_topk(ds.vectors, ds.queries, 10, "l2")
    found = [np.array(h.ids) for h in d.search_batch([{"vector": q, "limit": 10}
                                                      for q in ds.queries])]
    assert recall(found, truth) >= 0.95
    one = d.search(vector=ds.queries[0], limit=10, ef=100, explain=True)
    assert one.ids == found[0].tolist() or recall([np.array(one.ids)], truth[:1]) >= 0.9
    assert "VectorTopK" in str(one.plan)


def test_https_with_an_ssl_context(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    ctx = ssl.create_default_context(cafile=str(cert))
    with ServerProcess(str(tmp_path / "tls.varve"), token=TOKEN, env=child_env(),
                       args=["--tls-cert", str(cert), "--tls-key", str(key)]) as srv:
        assert srv.url.startswith("https://")
        with vv.Client(srv.url, token=TOKEN, ssl_context=ctx) as c:
            d = c.create_collection("t", {"emb": vv.Vector(2, metric="l2")})
            d.insert([{"id": 1, "emb": [0, 0]}, {"id": 2, "emb": [1, 1]}])
            assert d.search(vector=[1, 1]).ids == [2, 1]
            with pytest.raises(vv.ServerUnavailableError):     # no context: unverified
                vv.Client(srv.url, token=TOKEN, timeout=5).collections()

        async def main():
            async with vv.AsyncClient(srv.url, token=TOKEN, ssl_context=ctx) as a:
                return (await (await a.collection("t")).get(2))["emb"].tolist()
        assert asyncio.run(main()) == [1, 1]


# ---- AsyncClient ----------------------------------------------------------------------

def test_async_client_copies_through_stdin_and_stdout(server, client):
    """copy_data goes up with COPY FROM STDIN (str or bytes) and comes back, as bytes,
    from COPY TO STDOUT."""
    async def main():
        async with vv.AsyncClient(server.url, token=TOKEN) as a:
            await a.sql("CREATE TABLE ac (id int PRIMARY KEY, s text, ts timestamptz)")
            r = await a.sql("COPY ac FROM STDIN WITH (FORMAT csv)",
                            copy_data='1,"x, y",2026-01-02 03:04:05+00\n2,,\n')
            assert (r.status, r.rowcount, r.copy_data) == ("COPY 2", 2, None)
            out = await a.sql("COPY (SELECT * FROM ac ORDER BY id) TO STDOUT")
            assert out.copy_data == b"1\tx, y\t2026-01-02 03:04:05+00\n2\t\\N\t\\N\n"
            assert (await a.sql("COPY ac (id) FROM STDIN", copy_data=b"3\n")).rowcount == 1
            assert (await a.sql("SELECT count(*) FROM ac")).rows == [(3,)]
            with pytest.raises(vv.NotSupportedError):   # bytes: a --pg driver's (0A000)
                await a.sql("COPY ac TO STDOUT WITH (FORMAT binary)")
            await a.sql("DROP TABLE ac")
    asyncio.run(main())


def test_async_client_round_trips(server, client):
    async def main():
        async with vv.AsyncClient(server.url, token=TOKEN) as a:
            d = await a.create_collection("adocs", {"tag": "int", "ts": "timestamp",
                                                    "emb": vv.Vector(3, metric="l2")})
            assert await a.collections() == ["adocs"]
            assert await d.insert([{"id": 1, "tag": 1, "emb": [1, 0, 0],
                                    "ts": dt.datetime(2024, 1, 1, tzinfo=UTC)}]) == [1]
            ids = await d.insert_arrays(id=np.arange(2, 12), tag=np.arange(10),
                                        emb=np.eye(10, 3, dtype=np.float32))
            assert ids.tolist() == list(range(2, 12))
            doc = await d.get(1)
            assert doc["ts"] == dt.datetime(2024, 1, 1, tzinfo=UTC)
            assert doc["emb"].dtype == np.float32 and await d.get(99) is None
            hits = await d.search(vector=[1, 0, 0], limit=3)
            assert hits.ids[0] in (1, 2) and isinstance(hits[0], vv.Hit)
            many = await asyncio.gather(*(d.search(vector=[0, 1, 0], limit=2)
                                          for _ in range(20)))
            assert all(h.ids == many[0].ids for h in many)
            assert await d.count("tag > 4") == 5
            assert await d.upsert({"id": 11, "tag": 50}) == [11]
            assert (await d.find("tag >= 50", select=["tag"]))[0].fields == {"tag": 50}
            assert (await d.get(11))["emb"].tolist() == [0, 0, 0]     # merged: kept
            assert await d.replace({"id": 10, "tag": 8}) == [10]
            assert (await d.get(10))["emb"] is None                   # replaced: reset
            assert await d.upsert({"id": 10, "emb": [0, 1, 1]}, merge=False) == [10]
            assert (await d.get(10))["tag"] is None
            assert await d.get(ids=[11, 99, 10], select=["tag"]) == \
                [{"id": 11, "tag": 50}, {"id": 10, "tag": None}]
            assert [h.id for h in await d.find(offset=8, select=[])] == [9, 11, 10]
            same = await a.get_or_create_collection("adocs", {
                "tag": "int", "ts": "timestamp", "emb": vv.Vector(3, metric="l2")})
            assert await same.count() == 11
            with pytest.raises(vv.SchemaError, match="'tag'"):
                await a.create_collection("adocs", {"tag": "text", "ts": "timestamp",
                                                    "emb": vv.Vector(3, metric="l2")},
                                          exist_ok=True)
            batch = await d.search_batch([{"vector": [0, 0, 1], "limit": 1},
                                          {"vector": [1, 0, 0], "limit": 1}])
            assert batch[0].ids == [4] and batch[1].ids[0] in (1, 2)    # 1 and 2 tie
            same = await d.search(vectors=[[0, 0, 1], [1, 0, 0]], limit=1)
            assert [h.ids for h in same] == [h.ids for h in batch]
            assert await d.update({"tag": 0}, ids=[1]) == 1
            assert await d.delete(ids=[11]) == 1
            r = await a.sql("SELECT count(*) FROM adocs")
            assert r.rows == [(10,)]
            assert [e["doc"]["tag"] for e in await d.history(1)] == [1, 0]
            assert (await a.verify()).ok and (await a.history())[-1].version == \
                await a.version()
            v = await a.version()
            with pytest.raises(vv.DimensionError):
                await d.insert({"emb": [1, 0]})
            with pytest.raises(vv.NotFoundError):
                await a.collection("nope")
            with pytest.raises(vv.SqlError):
                await a.sql("SELEC")
            assert await a.version() == v
        async with vv.AsyncClient(server.url, token="wrong") as bad:
            with pytest.raises(vv.AuthenticationError):
                await bad.collections()
    asyncio.run(main())


def test_import_varvedb_loads_no_client():
    out = subprocess.run(
        [PYTHON, "-c", "import sys, varvedb; print(sorted(m for m in ('http.client', 'httpx', "
         "'varvedb.client') if m in sys.modules)); varvedb.Client; "
         "print('httpx' in sys.modules)"],
        capture_output=True, text=True, env=child_env(), timeout=1800)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[]", "False"]


def test_the_client_loads_no_engine_and_no_numba():
    out = subprocess.run(
        [PYTHON, "-c", "import sys, varvedb; varvedb.Client; varvedb.VarveError; "
         "print(sorted(m for m in ('numba', 'varvedb.engine', 'varvedb.collection', "
         "'varvedb.query.planner', 'pglast') if m in sys.modules))"],
        capture_output=True, text=True, env=child_env(), timeout=1800)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_every_public_name_resolves_and_is_listed():
    for name in vv.__all__:
        assert getattr(vv, name) is not None
    assert set(vv.__all__) <= set(dir(vv))
    assert vv.Hits is __import__("varvedb.results").results.Hits
    with pytest.raises(AttributeError):
        vv.no_such_name


def test_the_readme_client_example_runs(tmp_path):
    # The README's embedded examples make notes.varve (run here in a process of
    # their own, which exits and lets go of the file); its ```py block then runs
    # as written against `varvedb serve notes.varve --token s3cret`.
    import re
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    text = open(os.path.join(root, "README.md")).read()
    embedded = re.findall(r"```python\n(.*?)```", text, re.S)
    (client_block,) = re.findall(r"```py\n(.*?)```", text, re.S)
    script = tmp_path / "readme.py"       # each block as test_cli_and_docs runs it
    script.write_text(
        "import ast, asyncio, inspect\n"
        f"for code in {embedded!r}:\n"
        "    c = compile(code, 'README.md', 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)\n"
        "    asyncio.run(eval(c, {})) if c.co_flags & inspect.CO_COROUTINE else exec(c, {})\n")
    subprocess.run([PYTHON, str(script)], cwd=tmp_path, env=child_env(), check=True,
                   capture_output=True, timeout=300)
    assert "vv.Client(\"http://127.0.0.1:8080\", token=\"s3cret\")" in client_block
    with ServerProcess(str(tmp_path / "notes.varve"), token="s3cret") as srv:
        code = client_block.replace("http://127.0.0.1:8080", srv.url)
        out = subprocess.run([PYTHON, "-c", code], cwd=tmp_path, env=child_env(),
                             capture_output=True, text=True, timeout=1800)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "Hit(id=" in out.stdout and "[(" in out.stdout


# ---- the Database and Collection verbs beyond CRUD: same signatures, same result types ----

def _twins(client):
    """_docs on the server and on an embedded :memory: database, written alike."""
    twin_db = vv.connect(":memory:")
    return _docs(client), twin_db, _docs(twin_db)


def test_explain_answers_the_embedded_plan_objects(client):
    d, twin_db, twin = _twins(client)
    for verb, args in [("search", {"vector": [2, 0, 1], "where": "tag = 1", "limit": 3}),
                       ("search", {"text": "apple", "vector": [1, 0, 1], "limit": 4}),
                       ("find", {"where": "tag = 2", "limit": 2}),
                       ("count", {"where": "tag = 0"})]:
        got, want = d.explain(verb, **args), twin.explain(verb, **args)
        assert isinstance(got, PlanNode) and type(got) is type(want)
        # the same tree, but for the version each side's file is at
        assert str(got).replace(f"version {client.version}", "v") == \
            str(want).replace(f"version {twin_db.version}", "v")
    hits = d.search(vector=[2, 0, 1], limit=3, explain=True)
    assert hits.plan.find(VectorTopK).strategy == "exact"
    from varvedb.query.request import Count
    assert d.plan(Count.of("tag = 1")) == d.explain("count", where="tag = 1")
    assert str(d.plan(Count.of("tag = 1"))) == \
        str(twin.plan(Count.of("tag = 1"))).replace(f"version {twin_db.version}",
                                                     f"version {client.version}")
    with pytest.raises(vv.OptionError):
        d.plan({"where": "tag = 1"})
    with pytest.raises(vv.OptionError):          # refused before anything is sent
        d.explain("upsert")
    with pytest.raises(vv.DimensionError):
        d.explain("search", vector=[1, 2])
    twin_db.close()


def test_index_verbs_and_their_bad_inputs(client, server):
    d = client.create_collection("items", {"tag": "int", "emb": vv.Vector(4)})
    rng = np.random.default_rng(1)
    d.insert_arrays(id=np.arange(300), tag=np.arange(300) % 5,
                    emb=rng.normal(size=(300, 4)).astype(np.float32))
    digest, version = file_digest(server.path), client.version
    for call, cls in [(lambda: d.create_index("emb", vv.HNSW(m=1)), vv.SchemaError),
                      (lambda: d.create_index("emb", "hnsw"), vv.SchemaError),
                      (lambda: d.create_index("emb", 5), vv.SchemaError),
                      (lambda: d.create_index("nope", vv.HNSW()), vv.UnknownFieldError),
                      (lambda: d.create_index("tag", vv.HNSW()), vv.UnknownFieldError),
                      (lambda: d.drop_index("tag"), vv.VarveError),
                      (lambda: d.index_status(), vv.SchemaError),
                      (lambda: d.wait_indexed(timeout=-1), vv.OptionError),
                      (lambda: d.add_field("emb", "int"), vv.SchemaError),
                      (lambda: d.rename_field("nope", "x"), vv.VarveError)]:
        with pytest.raises(cls):
            call()
    assert file_digest(server.path) == digest and client.version == version
    d.create_index("emb", vv.HNSW(m=8, ef_construction=64))
    with pytest.raises(vv.SchemaError):           # it has one now
        d.create_index("emb", vv.HNSW())
    assert d.wait_indexed(timeout=1800)           # a hang guard
    assert counts(d.index_status()) == {"field": "emb", "linked": 300, "unlinked": 0}
    assert d.vector_memory()["graph_bytes"] > 0
    assert d.search(vector=[1, 0, 0, 0], limit=3, explain=True).plan.find(
        VectorTopK).strategy in ("graph", "exact")
    d.create_index("tag", "sorted")
    assert d.find("tag = 2", limit=3).ids == [2, 7, 12]
    d.drop_index("tag")
    d.drop_index("emb")
    assert d.vector_memory()["graph_bytes"] == 0
    d.add_field("n", vv.Int(default=7))
    d.rename_field("n", "m")
    assert d.get(1, select=["m"]) == {"id": 1, "m": 7}
    d.drop_field("m")
    assert "m" not in d.schema.fields


def test_branches_through_the_client_answer_as_embedded(client):
    d, twin_db, twin = _twins(client)
    for db, coll in ((client, d), (twin_db, twin)):
        info = db.branch("exp")
        assert isinstance(info, vv.BranchInfo) and (info.name, info.parent) == ("exp", "main")
        db.use("exp")
        assert db.current_branch == "exp" and db.version == info.head
        coll.update({"tag": 9}, ids=[1])
        coll.delete(ids=[2])
        coll.insert({"id": 77, "title": "on exp"})
        assert coll.get(77) is not None and coll.count(branch="main") == 10
        db.use("main")
        assert coll.get(77) is None and coll.get(1)["tag"] == 1
    changes = client.diff("main", "exp")
    assert changes == twin_db.diff("main", "exp")
    assert isinstance(changes["docs"], vv.Changes)
    assert changes["docs"] == vv.Changes(added=[77], changed=[1], deleted=[2])
    # (a version of main, (branch, version)); versions are the file's, counted on each side
    heads, twin_heads = [b.head for b in client.branches()], [b.head for b in twin_db.branches()]
    assert client.diff(heads[0], ("exp", heads[1])) == \
        twin_db.diff(twin_heads[0], ("exp", twin_heads[1])) == changes
    assert [b.name for b in client.branches()] == ["main", "exp"]
    client.use("exp")            # the branch's line: main's commits up to its fork, then its own
    twin_db.use("exp")
    assert [h.branch for h in client.history()][-5:] == \
        [h.branch for h in twin_db.history()][-5:] == ["main", "exp", "exp", "exp", "exp"]
    client.use("main")
    twin_db.use("main")
    v = client.merge("exp")
    assert v == client.version and d.get(77)["title"] == "on exp" and d.get(2) is None
    # the typed errors, and nothing written
    before = client.version
    with pytest.raises(vv.NotFoundError):
        client.use("nosuch")
    with pytest.raises(vv.BranchError):
        client.drop_branch("main")
    with pytest.raises(vv.NotFoundError):
        client.merge("nosuch")
    with pytest.raises(vv.OptionError):
        client.diff(["a", "b", "c"], 1)
    with client.transaction():
        with pytest.raises(vv.TransactionError):
            client.use("exp")
    client.use("exp")
    with pytest.raises(vv.BranchError):           # the branch in use
        client.drop_branch("exp")
    client.use("main")
    assert client.version == before and client.current_branch == "main"
    client.drop_branch("exp")
    with pytest.raises(vv.NotFoundError):
        client.use("exp")
    # a conflict: both sides changed id 3 to different documents
    client.branch("c")
    d.update({"tag": 5}, ids=[3])
    client.use("c")
    d.update({"tag": 6}, ids=[3])
    client.use("main")
    before = client.version
    with pytest.raises(vv.MergeConflictError) as e:
        client.merge("c")
    assert e.value.http_status == 409 and client.version == before
    twin_db.close()


def test_restore_and_vacuum_act_on_the_servers_own_file(tmp_path):
    srv, c = _fresh_client(tmp_path)
    try:
        d = _docs(c)                               # versions 1, 2
        first = {h.id: h.fields for h in d.find()}
        d.update({"tag": 9}, where="tag = 1")
        d.delete(ids=[0, 1])
        assert c.restore(2) == c.version == 5
        assert {h.id: h.fields for h in d.find()} == first
        with pytest.raises(vv.VersionNotFoundError):
            c.restore(10 ** 6)
        with pytest.raises(vv.OptionError):
            c.restore("yesterday")
        with pytest.raises(vv.OptionError):
            c.vacuum(graphs="nope")
        assert c.version == 5
        report = c.vacuum(keep=2)
        assert isinstance(report, VacuumReport) and (report.oldest, report.version) == (4, 5)
        assert report.rows_dropped > 0 and report.bytes_after > 0
        with pytest.raises(vv.VersionNotFoundError):
            d.count(as_of=2)
        assert d.count(as_of=4) == 8 and d.count() == 10
        assert c.verify().ok
        c.checkpoint()
        assert [v.version for v in c.history()] == [4, 5]
    finally:
        c.close()
        srv.stop()
    # the server's file, opened here once the server is gone, holds what it answered
    with vv.connect(srv.path, readonly=True) as db:
        assert db["docs"].count() == 10 and [v.version for v in db.history()] == [4, 5]


def _contents(db) -> dict:
    return {name: sorted(((h.id, repr(sorted(h.fields.items()))) for h in db[name].find()))
            for name in db.collections()}


def test_backup_streams_a_copy_the_client_writes_and_that_opens_embedded(client, server,
                                                                         tmp_path):
    d = _docs(client)
    d.insert([{"id": 100 + i, "title": "x" * 3000, "emb": [i, 1, 1]} for i in range(500)])
    dest = tmp_path / "copy.varve"
    info = client.backup(dest)
    assert isinstance(info, BackupInfo) and info.path == str(dest)
    assert info.version == client.version and info.bytes == os.path.getsize(dest) > 1 << 20
    assert not os.path.exists(str(dest) + ".tmp")
    with vv.connect(str(dest), readonly=True) as copy:
        assert copy.version == info.version and copy.verify().ok
        assert _contents(copy) == _contents(client)
        assert [v.chain for v in copy.history()] == [v.chain for v in client.history()]
    digest = file_digest(dest)
    with pytest.raises(vv.OptionError):           # never over a file
        client.backup(dest)
    assert file_digest(dest) == digest
    with pytest.raises(vv.AuthenticationError):   # the token, as on every route
        vv.Client(server.url, token="wrong").backup(tmp_path / "no.varve")
    assert not os.path.exists(tmp_path / "no.varve") and \
        not os.path.exists(tmp_path / "no.varve.tmp")

    async def main():
        async with vv.AsyncClient(server.url, token=TOKEN, timeout=SLOW) as ac:
            a = await ac.backup(tmp_path / "async.varve")
            assert (await ac.branches())[0].name == "main"
            plan = await (await ac.collection("docs")).explain("count")
            return a, plan
    a, plan = asyncio.run(main())
    assert a.version == info.version and file_digest(tmp_path / "async.varve") == digest
    assert isinstance(plan, PlanNode) and plan.NODE == "Count"


def test_new_routes_refuse_bad_bodies_with_a_type_and_change_nothing(client, server):
    import http.client as http_client
    import json as _json
    _docs(client)
    digest, version = file_digest(server.path), client.version

    def call(method, path, body=None, headers=()):
        conn = http_client.HTTPConnection("127.0.0.1", server.port, timeout=SLOW)
        try:
            conn.request(method, path, None if body is None else _json.dumps(body).encode(),
                         {"Authorization": f"Bearer {TOKEN}",
                          "Content-Type": "application/json", **dict(headers)})
            r = conn.getresponse()
            return r.status, _json.loads(r.read())
        finally:
            conn.close()
    cases = [
        ("POST", "/collections/docs/explain", {"verb": "upsert"}, 400, "OptionError"),
        ("POST", "/collections/docs/explain", {"vector": [1, 2]}, 422, "DimensionError"),
        ("POST", "/collections/docs/indexes", {"field": "emb", "index": 5}, 422, "SchemaError"),
        ("POST", "/collections/docs/indexes", {"field": "emb", "index": {"kind": "hnsw",
                                                                         "m": 1}},
         422, "SchemaError"),
        ("POST", "/collections/docs/indexes", {"field": "emb"}, 422, "SchemaError"),
        ("DELETE", "/collections/docs/indexes/nope", None, 422, None),
        ("POST", "/collections/docs/wait_indexed", {"timeout": -1}, 400, "OptionError"),
        ("POST", "/collections/docs/fields", {"name": "x", "spec": "nokind"}, 422, None),
        ("POST", "/collections/docs/fields/nope/rename", {"new": "y"}, 422, None),
        ("POST", "/branches", {"name": 5}, 400, "OptionError"),
        ("POST", "/branches", {"name": "b", "at": "never"}, 400, "OptionError"),
        ("GET", "/branches/nosuch", None, 404, "NotFoundError"),
        ("DELETE", "/branches/main", None, 409, "BranchError"),
        ("POST", "/merge", {"source": "nosuch"}, 404, "NotFoundError"),
        ("POST", "/diff", {"a": [1], "b": 1}, 400, "OptionError"),
        ("POST", "/diff", {"a": {"x": 1}, "b": 1}, 400, "OptionError"),
        ("POST", "/vacuum", {"keep": "soon"}, 400, "OptionError"),
        ("POST", "/vacuum", {"graphs": "nope"}, 400, "OptionError"),
        ("POST", "/vacuum", {"keep": 1, "extra": 1}, 400, "RequestError"),
        ("POST", "/restore", {}, 400, "RequestError"),
        ("POST", "/restore", {"version": None}, 400, "OptionError"),
        ("POST", "/restore", {"version": 10 ** 9}, 404, "VersionNotFoundError"),
        ("POST", "/collections/docs/count", {}, 404, "NotFoundError",),
    ]
    for i, (method, path, body, status, kind) in enumerate(cases):
        headers = [("X-Varve-Branch", "nosuch")] if i == len(cases) - 1 else []
        got, out = call(method, path, body, headers)
        assert got == status and (kind is None or out["error"]["type"] == kind), \
            (method, path, body, got, out)
        assert file_digest(server.path) == digest, (method, path, body)
    assert client.version == version


# What of Database, Session and Collection has no remote form, and why; every other
# public name is on Client / RemoteCollection (and their async twins)
NOT_REMOTE = {
    "Database": {
        "session": "a Session is this process's object; a client's transaction is "
                   "transaction() (or SQL's BEGIN)",
        "thread_session": "the same: the server gives each request a session of its own",
        "backup_stream": "the server's GET /backup is it; backup(path) writes it here"},
    "Collection": {
        "table": "the engine's table", "prepare_rows": "rows coerced into this process's "
        "arrays, for the engine's writer", "insert_prepared": "the same",
        "prepared_now": "the same", "corpus_stats": "a shard's full-text statistics for a "
        "sharded search in process (integrations/sharded.py): CorpusStats has no wire form"},
    "Session": {
        "tx": "the engine's transaction object", "branch_id": "the engine's branch id",
        "snapshot": "the engine's snapshot", "read_state": "the engine's version and "
        "branch id, a kept search's key", "writing": "the engine's transaction scope",
        "begin": "transaction() (or sql('BEGIN'))", "commit": "transaction()'s exit (or "
        "sql('COMMIT'))", "rollback": "an exception in transaction() (or sql('ROLLBACK'))",
        "in_transaction": "the client's transaction is pinned to a thread, not an object",
        "pin": "SQL's REPEATABLE READ block's hold on its version (sql('BEGIN ISOLATION "
        "LEVEL REPEATABLE READ') over the client)", "unpin": "the same",
        "sql_version": "the same", "sql_failed": "the same (a failed block: sql() "
        "answers 25P02 over the client)"},
}
ASYNC_NAMES = {"close": "aclose"}     # AsyncClient's coroutine that closes


def test_every_public_verb_is_on_the_client_or_has_its_reason():
    from varvedb.client import AsyncRemoteCollection, RemoteCollection
    from varvedb.session import Session
    for cls, remotes in ((vv.Database, (vv.Client, vv.AsyncClient)),
                         (Session, (vv.Client, vv.AsyncClient)),
                         (vv.Collection, (RemoteCollection, AsyncRemoteCollection))):
        names = {n for n in dir(cls) if not n.startswith("_")}
        excused = set(NOT_REMOTE[cls.__name__])
        assert excused <= names, excused - names          # no reason for a name gone
        for remote in remotes:
            missing = {n for n in names - excused
                       if not hasattr(remote, n) and
                       not hasattr(remote, ASYNC_NAMES.get(n, n))}
            assert not missing, (cls.__name__, remote.__name__, missing)


def test_run_refresh_and_database_answer_as_embedded(client):
    from varvedb.query.request import Count, Find, Search
    d, twin_db, twin = _twins(client)
    for request in (Search.of([2, 0, 1], limit=3), Find.of("tag = 1", limit=2),
                    Count.of("tag = 2")):
        got, want = d.run(request), twin.run(request)
        assert got == want if isinstance(want, int) else got.ids == want.ids
    with pytest.raises(vv.OptionError):
        d.run({"where": "tag = 1"})
    assert client.refresh() == client.version and d.database is client
    twin_db.close()


# ---- AsyncClient's transactions under cancellation and child tasks ---------------------
# A task canceled while its transaction opens or commits must not leave the server
# holding it open, nor hide a commit it made; a task made inside a block that calls
# after it runs on its own (each case beside AsyncDatabase's answer to it). To
# cancel at the moment that matters (the server acted, the client has not heard)
# the client talks through a relay on 127.0.0.1 that can hold the server's answers.

class _HeldAnswers:
    """A TCP relay to the server: requests pass at once; after hold(n), the n+1th
    answer from then waits here (`held` is set, `answer` is it) until release()."""

    def __init__(self, port: int):
        self.upstream = port
        self.to_hold: int | None = None     # answers to pass before the one held
        self.held = asyncio.Event()
        self._released = asyncio.Event()
        self.answer = b""

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def hold(self, after: int = 0) -> None:
        self.to_hold = after

    def release(self) -> None:
        self.to_hold = None
        self._released.set()

    async def _answers(self, src, dst):
        buf = b""
        while data := await src.read(1 << 16):
            buf += data
            while (head := buf.find(b"\r\n\r\n")) >= 0:      # one whole answer at a time
                length = next((int(line.split(b":")[1]) for line in buf[:head].split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                if len(buf) < head + 4 + length:
                    break
                answer, buf = buf[:head + 4 + length], buf[head + 4 + length:]
                if self.to_hold == 0:
                    self.answer = answer
                    self.held.set()
                    await self._released.wait()
                elif self.to_hold is not None:
                    self.to_hold -= 1
                dst.write(answer)
                await dst.drain()

    async def _relay(self, reader, writer):
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)

        async def requests():
            while data := await reader.read(1 << 16):
                up_writer.write(data)
                await up_writer.drain()
        try:
            await asyncio.gather(requests(), self._answers(up_reader, writer))
        except OSError:       # the client dropped a canceled request's connection
            pass
        finally:
            writer.close()
            up_writer.close()

    async def close(self) -> None:
        self._server.close()
        await self._server.wait_closed()


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, SLOW * 5))     # a hang guard


def _transaction_state(server, tid: str) -> tuple[int, dict]:
    """GET /transactions/{tid} straight to the server: (status, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=SLOW)
    conn.request("GET", f"/transactions/{tid}", headers={"Authorization": f"Bearer {TOKEN}"})
    resp = conn.getresponse()
    out = resp.status, msgspec.json.decode(resp.read())
    conn.close()
    return out


def _answer_body(raw: bytes) -> dict:
    return msgspec.json.decode(raw.split(b"\r\n\r\n", 1)[1])


def test_a_task_canceled_while_its_transaction_opens_leaves_none_open(server, client):
    client.create_collection("c", {"n": "int"})

    async def main():
        relay = _HeldAnswers(server.port)
        ac = vv.AsyncClient(await relay.start(), token=TOKEN, timeout=SLOW)
        relay.hold()
        task = asyncio.create_task(ac.transaction().__aenter__())
        await relay.held.wait()             # opened on the server; the client not told
        tid = _answer_body(relay.answer)["id"]
        task.cancel()
        relay.release()
        with pytest.raises(asyncio.CancelledError):
            await task
        status, body = _transaction_state(server, tid)
        assert status == 404 and body["error"]["type"] == "TransactionNotFoundError", body
        client.collection("c").insert({"id": 1, "n": 1})      # the writer lock is free
        await ac.aclose()
        await relay.close()
    _run(main())


@pytest.mark.parametrize("step", ["its transaction opens", "its text runs in it"])
def test_a_task_canceled_as_sql_begin_opens_its_transaction_changes_nothing(server, client,
                                                                             step):
    """sql("BEGIN; ...") over AsyncClient: a 409 (nothing ran), then POST
    /transactions, then the text again in it. Canceled at either step, after the
    server acted: the transaction it opened is rolled back, the task holds none."""
    client.create_collection("c", {"n": "int"})

    async def main():
        relay = _HeldAnswers(server.port)
        ac = vv.AsyncClient(await relay.start(), token=TOKEN, timeout=SLOW)
        relay.hold(after=1 if step == "its transaction opens" else 2)
        task = asyncio.create_task(ac.sql("BEGIN; INSERT INTO c (id, n) VALUES (1, 1)"))
        await relay.held.wait()
        opened = _answer_body(relay.answer) if step == "its transaction opens" else None
        task.cancel()
        relay.release()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not ac.in_transaction
        if opened is not None:
            assert _transaction_state(server, opened["id"])[0] == 404
        assert client.collection("c").count() == 0
        client.collection("c").insert({"id": 2, "n": 2})      # the writer lock is free
        assert (await ac.sql("SELECT count(*) FROM c")).rows == [(1,)]
        await ac.aclose()
        await relay.close()
    _run(main())


@pytest.mark.parametrize("when", ["as it goes out", "once the server committed"])
def test_a_task_canceled_as_its_transaction_commits_says_it_committed(server, client, when):
    """The commit is seen through: the task's CancelledError comes after it, the
    scope's version set and a note saying it committed, as AsyncDatabase's does
    (tests/test_async_database.py); the server holds nothing open."""
    client.create_collection("c", {"n": "int"})

    async def main():
        relay = _HeldAnswers(server.port)
        ac = vv.AsyncClient(await relay.start(), token=TOKEN, timeout=SLOW)
        c = await ac.collection("c")
        body_done = asyncio.Event()
        scope = []

        async def work():
            async with ac.transaction() as t:
                scope.append(t)
                await c.insert([{"id": i, "n": i} for i in range(100)])
                if when != "as it goes out":
                    relay.hold()
                body_done.set()
            return "not canceled"

        task = asyncio.create_task(work())
        await (body_done.wait() if when == "as it goes out" else relay.held.wait())
        task.cancel()
        relay.release()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        t, = scope
        assert t.version is not None and t.version == client.version
        assert f"committed (version {t.version})" in " ".join(caught.value.__notes__)
        assert _transaction_state(server, t.id)[0] == 404
        assert client.collection("c").count() == 100
        client.collection("c").insert({"id": 5000, "n": 1})   # the writer lock is free
        await ac.aclose()
        await relay.close()
    _run(main())


@pytest.mark.parametrize("kind", ["AsyncClient", "AsyncDatabase"])
def test_a_task_made_in_a_block_that_calls_after_it_runs_on_its_own(server, client, tmp_path,
                                                                     kind):
    client.create_collection("c", {"n": "int"})

    async def main():
        if kind == "AsyncClient":
            db = vv.AsyncClient(server.url, token=TOKEN, timeout=SLOW)
        else:
            db = await vv.connect_async(str(tmp_path / "e.varve"))
            await db.create_collection("c", {"n": "int"})
        c = await db.collection("c")
        go = asyncio.Event()

        async def later():
            await go.wait()
            return await c.insert({"id": 7, "n": 7}), await c.count()

        async with db.transaction():
            await c.insert({"id": 1, "n": 1})
            child = asyncio.create_task(later())
        go.set()
        assert await child == ([7], 2)
        async with db.transaction():          # and this task's next block is its own
            await c.insert({"id": 8, "n": 8})
        assert await c.count() == 3
        await db.aclose()
    _run(main())


def test_waiting_for_an_index_through_the_client_shows_the_rows_it_takes(tmp_path, capsys):
    """Client.wait_indexed(progress=True) draws the embedded wait's bar: the rows the
    index still takes, from index_status between waits; a wait cut short by its
    timeout says False with its bar drawn as far as it got. A real server on
    127.0.0.1 in this process, so that its maintainer can be held."""
    import re
    import uvicorn
    from varvedb.server.app import build_app
    db = vv.connect(str(tmp_path / "bar.varve"))
    c = db.create_collection("items", {"emb": vv.Vector(8, metric="l2")})
    c.create_index("emb", vv.HNSW(m=8, ef_construction=32))
    rng = np.random.default_rng(3)
    c.insert_arrays(id=np.arange(200), emb=rng.random((200, 8), np.float32))
    assert c.wait_indexed(timeout=1800)                 # a hang guard
    app = build_app(db, threads=2)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(),
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    client = None
    try:
        guard = time.monotonic() + 1800                 # a hang guard
        while not server.started:                       # uvicorn's flag: listening
            assert thread.is_alive() and time.monotonic() < guard
            time.sleep(0.01)
        client = vv.Client(f"http://127.0.0.1:{server.config.port}", timeout=1800)
        d = client.collection("items")
        answers = []
        waiting = threading.Thread(target=lambda: answers.append(d.wait_indexed(progress=True)))
        with db.engine.maintainer.hold():               # nothing links while held
            c.insert_arrays(id=np.arange(200, 300), emb=rng.random((100, 8), np.float32))
            capsys.readouterr()
            assert d.wait_indexed(timeout=0, progress=True) is False
            bar = capsys.readouterr().err
            assert "emb: waiting for its index" in bar and "0/100" in bar
            waiting.start()                             # its bar drawn at 0 while held
            bar = ""
            while "0/100" not in bar:
                assert waiting.is_alive() and time.monotonic() < guard
                time.sleep(0.01)
                bar += capsys.readouterr().err
        waiting.join(1800)                              # a hang guard
        assert answers == [True]
        assert "100/100" in capsys.readouterr().err
        assert counts(d.index_status()) == {"field": "emb", "linked": 300, "unlinked": 0}
        assert d.wait_indexed(progress=False) is True and capsys.readouterr().err == ""
    finally:
        if client is not None:
            client.close()
        server.should_exit = True
        thread.join(1800)                               # a hang guard
        app.state.api.pool.shutdown(wait=True)
        db.close()
