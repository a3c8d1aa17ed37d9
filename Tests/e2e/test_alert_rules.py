"""The Prometheus rules in ops/prometheus: promtool accepts them and their unit tests pass, and they
watch only metrics and labels that docs/operations.md names, so that renaming a metric cannot
leave an alert silently watching nothing.

promtool is Debian's `prometheus` package (/usr/bin/promtool)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = "ops/prometheus/band-edge.rules.yml"
RULE_TESTS = "ops/prometheus/band-edge.rules.test.yml"
SCRAPE_CONFIG = "ops/prometheus/prometheus.example.yml"
OPERATIONS = ROOT / "docs" / "operations.md"

# Labels Prometheus itself puts on scraped series (band-edge sets neither), and the histogram
# bucket label.
TARGET_LABELS = {"instance", "job"}
HISTOGRAM_LABELS = {"le"}

KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
            "group_left", "group_right", "inf", "nan", "atan2"}


def promtool() -> str:
    path = shutil.which("promtool") or ("/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None)
    if path is None:
        pytest.fail("promtool is not installed: apt-get install --no-install-recommends prometheus")
    return path


def run_promtool(*args: str) -> None:
    result = subprocess.run([promtool(), *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (
        f"promtool {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")


def rules() -> list[dict]:
    document = yaml.safe_load((ROOT / RULES).read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def alerts() -> list[dict]:
    return [rule for rule in rules() if "alert" in rule]


def recorded_names() -> set[str]:
    return {rule["record"] for rule in rules() if "record" in rule}


# --- a small PromQL reader: enough for the selectors and grouping clauses of these rules ---------

STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
IDENTIFIER = r"[A-Za-z_:][A-Za-z0-9_:]*"
SELECTOR = re.compile(rf"({IDENTIFIER})?\s*\{{([^}}]*)\}}")
MATCHER = re.compile(rf"\s*({IDENTIFIER})\s*(?:=~|!~|!=|=)\s*(?:\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')\s*,?")
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def read_expression(expr: str) -> tuple[list[tuple[str | None, set[str]]], set[str], set[str]]:
    """(selectors as (metric name or None, label names matched), metric names, grouping labels)."""
    selectors = []
    for name, body in SELECTOR.findall(expr):
        labels, rest = set(), body
        while rest.strip():
            m = MATCHER.match(rest)
            assert m, f"cannot read the matchers {{{body}}} in: {expr}"
            labels.add(m.group(1))
            rest = rest[m.end():]
        selectors.append((name or None, labels))
    grouping = set()
    for _, names in GROUPING.findall(expr):
        grouping |= {n.strip() for n in names.split(",") if n.strip()}
    bare = STRING.sub('""', expr)
    bare = re.sub(r"\{[^}]*\}", " ", bare)
    bare = re.sub(r"\[[^\]]*\]", " ", bare)
    bare = GROUPING.sub(" ", bare)
    names = set()
    for m in re.finditer(rf"(?<![A-Za-z0-9_:.])({IDENTIFIER})(\s*\()?", bare):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in KEYWORDS:
            continue
        names.add(word)
    return selectors, names, grouping


def documented() -> dict[str, set[str]]:
    """Every metric docs/operations.md names in a code span, with the labels it gives it
    (`name{a,b}`); `up{job="band-edge"}` names `up`."""
    names: dict[str, set[str]] = {}
    for span in re.findall(r"`([^`\n]+)`", OPERATIONS.read_text()):
        m = re.match(rf"({IDENTIFIER})(?:\{{([^}}]*)\}})?", span)
        if not m:
            continue
        labels = names.setdefault(m.group(1), set())
        if m.group(2) and re.fullmatch(r"\s*[a-z_]+(\s*,\s*[a-z_]+)*\s*", m.group(2)):
            labels |= {label.strip() for label in m.group(2).split(",")}
    return names


def test_promtool_checks_the_rules():
    run_promtool("check", "rules", RULES)


def test_promtool_unit_tests_of_the_rules_pass():
    run_promtool("test", "rules", RULE_TESTS)


def test_promtool_checks_the_example_scrape_configuration_and_the_rules_it_loads():
    run_promtool("check", "config", SCRAPE_CONFIG)


def test_the_reader_finds_what_a_plain_search_finds():
    # The PromQL reader above must not lose a name: every band_edge_ word of the file is a metric
    # or a recording rule it reports.
    expressions = " ".join(rule["expr"] for rule in rules())
    found = set().union(*(read_expression(rule["expr"])[1] for rule in rules()))
    plain = set(re.findall(r"(?<![A-Za-z0-9_:])band_edge_[a-z0-9_]+(?![a-z0-9_:])", STRING.sub('""', expressions)))
    plain |= set(re.findall(rf"(?<![A-Za-z0-9_:])({IDENTIFIER}:{IDENTIFIER})", expressions))
    assert plain, "no band_edge_ metric in the rules"
    assert plain <= found, f"the reader missed {sorted(plain - found)}"


def test_every_metric_the_rules_use_is_named_in_docs_operations():
    docs = documented()
    recorded = recorded_names()
    used = set().union(*(read_expression(rule["expr"])[1] for rule in rules()))
    assert used, "no metric read from the rules"
    raw = used - recorded
    # A recording rule's name holds colons; a metric's never does.
    assert all(":" not in name for name in raw), f"used but not recorded here: {sorted(n for n in raw if ':' in n)}"
    missing = sorted(name for name in raw if name not in docs)
    assert not missing, f"the rules use metrics docs/operations.md does not name: {missing}"
    undocumented_records = sorted(name for name in recorded if name not in docs)
    assert not undocumented_records, f"recording rules docs/operations.md does not name: {undocumented_records}"


def test_every_label_the_rules_use_is_one_the_docs_give_that_metric():
    docs = documented()
    recorded = recorded_names()
    known = set().union(*docs.values()) | TARGET_LABELS | HISTOGRAM_LABELS
    problems = []
    for rule in rules():
        selectors, _, grouping = read_expression(rule["expr"])
        for name, labels in selectors:
            if name is None or name in recorded:
                continue
            extra = labels - docs.get(name, set()) - TARGET_LABELS
            if extra:
                problems.append(f"{rule.get('alert') or rule.get('record')}: {name} has no label {sorted(extra)}")
        extra = grouping - known
        if extra:
            problems.append(f"{rule.get('alert') or rule.get('record')}: groups by unknown labels {sorted(extra)}")
    assert not problems, "\n".join(problems)


def test_every_alert_has_a_severity_a_summary_and_a_description():
    problems = []
    for alert in alerts():
        if alert.get("labels", {}).get("severity") not in {"critical", "warning", "info"}:
            problems.append(f"{alert['alert']}: severity")
        for key in ("summary", "description"):
            if not alert.get("annotations", {}).get(key, "").strip():
                problems.append(f"{alert['alert']}: {key}")
    assert alerts() and not problems, problems


def test_every_alert_has_a_case_where_it_fires_and_one_where_it_does_not():
    document = yaml.safe_load((ROOT / RULE_TESTS).read_text())
    fires, quiet = set(), set()
    for case in document["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {alert["alert"] for alert in alerts()}
    assert names - fires == set(), f"never seen firing: {sorted(names - fires)}"
    assert names - quiet == set(), f"never seen quiet: {sorted(names - quiet)}"
    assert (fires | quiet) - names == set(), f"tests name alerts the rules lack: {sorted((fires | quiet) - names)}"


def test_every_alert_is_in_the_docs_alert_table():
    text = OPERATIONS.read_text()
    missing = [alert["alert"] for alert in alerts() if f"| `{alert['alert']}` |" not in text]
    assert not missing, f"docs/operations.md has no row for {missing}"
