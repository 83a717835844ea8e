"""`fa-doctor merge` on generated fleets with planted divergences, driven through the real CLI."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clirun import invoke
from fleet_samples import KNOB_WARN, REQUIREMENT, SMOKE_FAILED, jsonl, report, write


def merge(*args: str, stdin: str | None = None) -> tuple[int, dict[str, Any], str]:
    result = invoke(["merge", "--json", *args], input=stdin)
    return result.exit_code, json.loads(result.stdout), result.stderr


def healthy(n: int, prefix: str = "gpu", **kw: Any) -> dict[str, dict[str, Any]]:
    return {f"{prefix}-{i:02d}": report(f"{prefix}-{i:02d}", **kw) for i in range(n)}


def test_a_healthy_fleet(tmp_path: Path) -> None:
    code, doc, _ = merge(str(write(tmp_path, healthy(6))))
    assert code == 0 and doc["schema"] == "fa-doctor.fleet/1" and doc["status"] == "ok"
    assert doc["nodes"] == 6 and len(doc["groups"]) == 1 and doc["groups"][0]["nodes"][0] == "gpu-00"
    assert doc["findings"] == [] and doc["outliers"] == [] and doc["refused"] == []
    assert [v["id"] for v in doc["verdict"]] == ["fleet.ok"]
    assert doc["summary"] == {"ok": 6, "warn": 0, "fail": 0, "refused": 0, "unreachable": 0, "duplicates": 0}


def test_a_failing_group_is_the_install(tmp_path: Path) -> None:
    docs = healthy(4) | healthy(3, "new", fa="4.0.0b40", findings=(REQUIREMENT,))
    code, doc, _ = merge(str(write(tmp_path, docs)))
    assert code == 1 and doc["status"] == "fail"
    failing, passing = doc["groups"]  # failing groups first
    assert failing["status"] == "fail" and failing["nodes"] == ["new-00", "new-01", "new-02"]
    assert failing["install"]["packages"][0] == "flash-attn-4 4.0.0b40" and passing["status"] == "ok"
    assert failing["fingerprint"] != passing["fingerprint"]
    (finding,) = doc["findings"]
    assert finding["id"] == "package.requirement" and finding["scope"] == "install"
    assert finding["nodes"] == failing["nodes"] and finding["groups"] == [failing["fingerprint"]]
    assert finding["remedies"] == [REQUIREMENT["remedies"][0]]  # once, not once per node
    assert doc["outliers"] == []  # a whole group failing is not an outlier
    assert [v["id"] for v in doc["verdict"]] == ["fleet.failing"]


def test_an_outlier_node(tmp_path: Path) -> None:
    docs = healthy(5)
    docs["gpu-03"] = report("gpu-03", findings=(SMOKE_FAILED,), gpus=7)
    code, doc, _ = merge(str(write(tmp_path, docs)))
    assert code == 1 and len(doc["groups"]) == 1  # GPU count is hardware: same fingerprint
    (outlier,) = doc["outliers"]
    assert outlier["node"] == "gpu-03" and outlier["group"] == doc["groups"][0]["fingerprint"]
    why = " / ".join(outlier["why"])
    assert "fail where 4 other node(s) of its group are ok" in why
    assert "7 GPU(s) visible where the others see 8" in why and "only here: smoke.failed (fail)" in why
    assert doc["findings"][0]["scope"] == "node"
    assert {v["id"] for v in doc["verdict"]} == {"fleet.failing", "fleet.outlier"}


def test_no_outlier_without_a_majority(tmp_path: Path) -> None:
    docs = healthy(2) | {"gpu-09": report("gpu-09", findings=(KNOB_WARN,))}
    docs["gpu-08"] = report("gpu-08", findings=(SMOKE_FAILED,))
    code, doc, _ = merge(str(write(tmp_path, docs)))
    assert code == 1 and doc["outliers"] == []  # 2 of 4 alike is no majority


def test_mixed_schema_versions(tmp_path: Path) -> None:
    docs = healthy(3)
    docs["future"] = report("gpu-future", schema="fa-doctor.report/2")
    docs["old"] = report("gpu-old", host=False)  # written before reports said where they ran
    docs["fleet"] = {"schema": "fa-doctor.fleet/1", "nodes": 3}
    docs["explain"] = {**report("x"), "command": "explain"}
    code, doc, _ = merge(str(write(tmp_path, docs)))
    assert code == 0 and doc["nodes"] == 4  # refused reports warn; --strict fails
    names = {n["node"] for n in doc["node_results"]}
    assert str(tmp_path / "old.json") in names  # no host: named by its file
    refused = {Path(r["source"]).stem: r["why"] for r in doc["refused"]}
    assert set(refused) == {"future", "fleet", "explain"}
    assert "schema fa-doctor.report/2" in refused["future"] and "reads fa-doctor.report/1" in refused["future"]
    assert "fleet report" in refused["fleet"] and "`explain`" in refused["explain"]
    assert doc["verdict"][0]["id"] == "fleet.refused"
    assert merge("--strict", str(tmp_path))[0] == 1


def test_a_truncated_file_and_a_cut_line(tmp_path: Path) -> None:
    write(tmp_path, healthy(2))
    whole = json.dumps(report("gpu-cut"), indent=2)
    (tmp_path / "gpu-cut.json").write_text(whole[: len(whole) // 2])
    lines = jsonl([report("gpu-l1"), report("gpu-l2")])
    (tmp_path / "more.jsonl").write_text(lines[: len(lines) - 40])
    code, doc, _ = merge(str(tmp_path))
    assert code == 0 and doc["nodes"] == 3
    refused = {r["source"]: r["why"] for r in doc["refused"]}
    assert (
        "not valid JSON" in refused[str(tmp_path / "gpu-cut.json")]
        and "truncated?" in refused[str(tmp_path / "gpu-cut.json")]
    )
    assert "not valid JSON" in refused[str(tmp_path / "more.jsonl") + ":2"]


def test_colliding_hostnames_told_apart_by_scheduler_ids(tmp_path: Path) -> None:
    ids = ["a1" * 28, "b2" * 28, "c3" * 28]
    docs = {f"r{i}": report("vm", ray=ray) for i, ray in enumerate(ids)}
    docs |= {f"s{i}": report("login", slurm_node=f"gpu-{i}") for i in range(2)}
    docs["alone"] = report("gpu-solo")
    code, doc, _ = merge(str(write(tmp_path, docs)))
    names = [n["node"] for n in doc["node_results"]]
    ray = ["vm (ray:a1a1a1a1a1a1)", "vm (ray:b2b2b2b2b2b2)", "vm (ray:c3c3c3c3c3c3)"]
    assert sorted(names) == sorted([*ray, "login (slurm:81234/gpu-0)", "login (slurm:81234/gpu-1)", "gpu-solo"])
    assert doc["groups"][0]["nodes"] == names and code == 0


def test_the_same_node_in_two_files_is_one_node(tmp_path: Path) -> None:
    """A node checked twice (a rerun, a copied folder) is one node: the newest report is merged (by file
    modification time, not by the order the files are read), and the fleet report says which."""
    docs = {"a-rerun": report("gpu-01", findings=(KNOB_WARN,)), "b-first": report("gpu-01"), "c": report("gpu-02")}
    folder = write(tmp_path, docs)
    os.utime(folder / "b-first.json", (1_000_000, 1_000_000))  # read last, but written first
    code, doc, _ = merge(str(folder))
    assert doc["nodes"] == 2 and [n["node"] for n in doc["node_results"]] == ["gpu-01", "gpu-02"]
    assert doc["node_results"][0]["source"] == str(folder / "a-rerun.json")  # the newer one
    assert doc["node_results"][0]["findings"] == ["knob.ignored"]
    kept, dropped = str(folder / "a-rerun.json"), str(folder / "b-first.json")
    assert doc["duplicates"] == [{"node": "gpu-01", "kept": kept, "dropped": [dropped], "reports": 2}]
    assert doc["summary"]["duplicates"] == 1 and doc["summary"]["warn"] == 1
    assert code == 0 and "fleet.duplicate" in [v["id"] for v in doc["verdict"]]
    assert merge("--strict", str(folder))[0] == 1
    text = invoke(["merge", str(folder)]).stdout
    assert "Nodes reported more than once" in text and f"merged {kept} (the newest)" in text


def test_expect_counts_distinct_nodes(tmp_path: Path) -> None:
    """Three files, two nodes: `--expect 3` fails, and says the third report was a node already counted."""
    folder = write(tmp_path, {"a": report("gpu-01"), "b": report("gpu-02"), "c": report("gpu-01")})
    code, doc, _ = merge("--expect", "3", str(folder))
    assert code == 1 and doc["nodes"] == 2
    (missing,) = (v for v in doc["verdict"] if v["id"] == "fleet.missing")
    assert missing["title"].startswith("2 node(s) reported where 3 were expected")
    assert "1 more report(s) were of nodes already counted" in missing["title"]
    assert merge("--expect", "2", str(folder))[0] == 0


def test_scheduler_node_ids_identify_a_node() -> None:
    """The scheduler's id of the node decides, not the host name: two Slurm jobs on one node are one node
    (in one stream, the later report wins); two Ray nodes on one host are two."""
    first = report("c1", slurm_node="gpu-a17")
    rerun = {**report("c2", slurm_node="gpu-a17", findings=(SMOKE_FAILED,)), "host": {**first["host"], "name": "c2"}}
    rerun["host"]["slurm_job_id"] = "81235"
    ray = [report("vm", ray="a1" * 28), report("vm", ray="b2" * 28)]
    code, doc, _ = merge("-", stdin=jsonl([first, *ray, rerun]))
    assert doc["nodes"] == 3 and doc["summary"]["duplicates"] == 1 and code == 1
    (slurm,) = (n for n in doc["node_results"] if n["source"] == "stdin:4")  # the rerun, merged
    assert slurm["node"] == "c2" and slurm["status"] == "fail"
    assert doc["duplicates"][0]["dropped"] == ["stdin:1"]


def test_json_lines_on_stdin() -> None:
    docs = [report(f"gpu-{i}") for i in range(3)] + [report("gpu-9", findings=(KNOB_WARN,))]
    code, doc, _ = merge("-", stdin=jsonl(docs) + "not json\n")
    assert code == 0 and doc["nodes"] == 4 and doc["summary"]["warn"] == 1
    assert doc["refused"] == [{"source": "stdin:5", "why": doc["refused"][0]["why"]}]
    assert [n["source"] for n in doc["node_results"]][:2] == ["stdin:1", "stdin:2"]


def test_nothing_readable_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{")
    code, doc, _ = merge(str(tmp_path / "bad.json"), str(tmp_path / "missing.json"))
    assert code == 2 and doc["schema"] == "fa-doctor.fleet/1" and doc["error"].startswith("no node report")
    assert {Path(r["source"]).name: r["why"] for r in doc["refused"]}["missing.json"] == "no such file"
    empty = tmp_path / "empty"
    empty.mkdir()
    code, doc, _ = merge(str(empty))
    assert code == 2 and "folder without" in doc["refused"][0]["why"]


def test_a_node_whose_check_could_not_run(tmp_path: Path) -> None:
    docs = healthy(3) | {"gpu-x": report("gpu-x", error="--python '/opt/venv/bin/python': no such file")}
    code, doc, _ = merge(str(write(tmp_path, docs)))
    assert code == 1 and doc["findings"][0]["id"] == "fleet.node_error"
    (node,) = (n for n in doc["node_results"] if n["node"] == "gpu-x")
    assert node["status"] == "fail" and "no such file" in node["error"]


def test_hostile_documents_are_refused_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "bigint.json").write_text("1" * 5000)
    (tmp_path / "array.json").write_text("[1, 2]")
    bad_finding = report("gpu-b")
    bad_finding["findings"].append({"id": "Not An Id", "severity": "fail"})
    write(tmp_path, {"badf": bad_finding, "ok": report("gpu-ok")})
    os.mkfifo(tmp_path / "fifo.json")  # must not block the read
    code, doc, _ = merge(str(tmp_path))
    assert code == 0 and doc["nodes"] == 1
    refused = {Path(r["source"]).name: r["why"] for r in doc["refused"]}
    assert refused["deep.json"] == "nested too deeply" and "not valid JSON" in refused["bigint.json"]
    assert "JSON list" in refused["array.json"] and "finding 4" in refused["badf.json"]
    assert "FIFO" in refused["fifo.json"]


def test_expect(tmp_path: Path) -> None:
    folder = str(write(tmp_path, healthy(3)))
    assert merge("--expect", "3", folder)[0] == 0
    code, doc, _ = merge("--expect", "4", folder)
    assert code == 1 and doc["expected"] == 4 and doc["verdict"][0]["id"] == "fleet.missing"


def test_stdin_from_a_terminal_is_misuse(monkeypatch: Any) -> None:
    import io
    import sys

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Tty())
    from fa_doctor.commands import merge as command

    result = command.run(command.MergeOptions(("-",)))
    assert result.exit_code == 2 and result.error and "pipe them in" in result.error


def test_many_reports_from_a_folder_and_from_stdin_merge_alike(tmp_path: Path) -> None:
    """Hundreds of files and the same reports as one JSON Lines stream: read one source at a time, the same fleet."""
    docs = healthy(220) | {f"bad-{i}": report(f"bad-{i}", findings=(SMOKE_FAILED,)) for i in range(3)}
    folder = write(tmp_path / "many", docs)
    (folder / "cut.json").write_text("{")
    code, from_files, _ = merge(str(folder))
    code2, from_stdin, _ = merge("-", stdin=jsonl([docs[k] for k in sorted(docs)]) + '{"cut')  # in file order
    assert code == code2 == 1
    for doc in (from_files, from_stdin):
        assert doc["nodes"] == 223 and len(doc["outliers"]) == 3 and len(doc["refused"]) == 1
    for key in ("groups", "findings", "outliers", "summary"):
        assert from_files[key] == from_stdin[key], key
    assert [v["id"] for v in from_files["verdict"]] == [v["id"] for v in from_stdin["verdict"]]
    assert from_stdin["refused"][0]["source"] == f"stdin:{len(docs) + 1}"


def test_pretty_documents_one_after_another() -> None:
    """`kubectl logs -l job-name=...` or `cat *.json`: whole documents in a row, a stray log line between them,
    the last one cut."""
    pretty = [json.dumps(report(f"pod-{i}"), indent=2) for i in range(3)]
    text = pretty[0] + "\n" + pretty[1] + "\nW1203 some kubelet warning\n" + pretty[2] + "\n" + pretty[0][:300]
    code, doc, _ = merge("-", stdin=text)
    assert code == 0 and doc["nodes"] == 3 and [n["node"] for n in doc["node_results"]] == ["pod-0", "pod-1", "pod-2"]
    starts = [n["source"] for n in doc["node_results"]]
    assert starts[0] == "stdin:1" and starts[1] == f"stdin:{pretty[0].count(chr(10)) + 2}"
    assert [r["why"].split(" (")[0] for r in doc["refused"]] == ["not valid JSON", "not valid JSON"]


def test_a_stream_of_empty_objects_is_bounded() -> None:
    """`yes '{}' | fa-doctor merge -`: every document is refused and counted; only the first few are listed,
    so the report stays small whatever the stream's length."""
    count = 60_000
    code, doc, _ = merge("-", stdin="{}\n" * count)
    assert code == 2 and doc["summary"]["refused"] == count and doc["nodes"] == 0
    assert len(doc["refused"]) == 20 and doc["refused"][0]["source"] == "stdin:1"
    assert doc["refused"][0]["why"].startswith("not a fa-doctor report")
    assert doc["refused"][-1]["source"] == "stdin:20" and f"({count} refused" in doc["error"]
    (refused,) = (v for v in doc["verdict"] if v["id"] == "fleet.refused")
    assert refused["title"].startswith(f"{count} report(s)") and refused["evidence"]["sources"][-1] == "... 59980 more"
    assert len(json.dumps(doc)) < 12_000
    for fmt in ("human", "markdown", "github", "junit"):
        run = invoke(["merge", "--format", fmt, "-"], input="{}\n" * count)
        text = run.stdout + run.stderr
        assert run.exit_code == 2 and len(text) < 12_000 and str(count) in text and "more" in text, fmt


def test_refusals_and_duplicates_beyond_the_list_are_counted(tmp_path: Path) -> None:
    """Among real reports: 30 cut reports and one node reported 25 times (the later one in a stream wins)."""
    lines = [json.dumps(report(f"gpu-{i}")) for i in range(3)]
    lines += [json.dumps(report("gpu-0"))[:500] for i in range(30)]  # each cut: one refusal each
    lines += [json.dumps(report("gpu-0")) for _ in range(24)]
    code, doc, _ = merge("-", stdin="\n".join(lines) + "\n")
    assert code == 0 and doc["nodes"] == 3 and doc["summary"]["refused"] == 30 and len(doc["refused"]) == 20
    (dup,) = doc["duplicates"]
    assert dup["node"] == "gpu-0" and dup["reports"] == 25 and dup["kept"] == "stdin:57" and len(dup["dropped"]) == 3
    assert doc["summary"]["duplicates"] == 24


def test_the_merger_holds_a_bounded_number_of_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    from fa_doctor.fleet import merge as merging
    from fa_doctor.fleet.read import Document

    monkeypatch.setattr(merging, "MAX_NODES", 3)
    merger = merging.Merger()
    for i in range(5):
        merger.add(Document(f"r{i}", report(f"gpu-{i}")))
    merger.add(Document("again", report("gpu-1")))  # a node held: still merged
    payload = merger.payload()
    assert len(payload.nodes) == 3 and payload.counts["refused"] == 2 and payload.duplicate_reports == 1
    assert "merge the fleet in parts" in payload.refused[0].why


class _Feed(io.RawIOBase):
    """A stream made as it is read (a pipe from a generator): how far it has been read is known at any time."""

    def __init__(self, parts: Iterator[bytes]) -> None:
        self.parts, self.pending, self.read_so_far = parts, b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending:
            self.pending = next(self.parts, b"")
            if not self.pending:
                return 0
        size = min(len(buffer), len(self.pending))
        buffer[:size], self.pending = self.pending[:size], self.pending[size:]
        self.read_so_far += size
        return size


def test_a_stream_is_read_document_by_document(monkeypatch: Any) -> None:
    """No read of the whole input before the first document: each document comes out while the stream is read,
    the reader a bounded distance ahead of it (about one document and one chunk). With a small document limit
    (64 KiB) and chunk (4 KiB): 400 reports of 5 KB (1.9 MB) in a stream made as it is read, one oversize document
    and log lines among them, refused and counted."""
    from fa_doctor.fleet import read

    monkeypatch.setattr(read, "REPORT_LIMIT", 64 << 10)
    monkeypatch.setattr(read, "CHUNK", 4 << 10, raising=False)  # (raising: the code before streaming had none)
    line = json.dumps(report("gpu-xxx")).encode() + b"\n"
    huge = json.dumps({**report("gpu-huge"), "pad": "x" * (100 << 10)}).encode() + b"\n"
    ends: list[int] = []  # where each report ends in the stream

    def parts() -> Iterator[bytes]:
        at = 0
        for i in range(400):
            for part in (line.replace(b"gpu-xxx", f"gpu-{i:03d}".encode()),) + ((huge,) if i == 210 else ()):
                at += len(part)
                ends.append(at) if part is not huge else None
                yield part
            if i % 50 == 0:
                at += len(b"W1203 a log line\n")
                yield b"W1203 a log line\n"

    feed = _Feed(parts())
    ahead, names, refused = 0, [], []
    for item in read.documents(["-"], io.BufferedReader(feed, 1024)):
        if isinstance(item, read.Document):
            names.append(item.doc["host"]["name"])
            ahead = max(ahead, feed.read_so_far - ends[len(names) - 1])
        else:
            refused.append(item.why)
    assert ends[-1] > 1_500_000 and ahead < 150_000, ahead  # the whole stream was never held
    assert names == [f"gpu-{i:03d}" for i in range(400)] and len(refused) == 9
    assert refused[5] == f"longer than {64 << 10} bytes" and "not valid JSON" in refused[0]
