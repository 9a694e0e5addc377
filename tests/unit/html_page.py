"""REPORT.html read back with the standard library's html.parser, as a browser's DOM would
hold it: every tag with its attributes, the text, each table by id (caption, header, rows
of cells with the `<data>` values in them), and every `<data>` element; and
`numbers_compared`, which holds each number of the page against OBSERVATION.json's."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser

from rig.report import Observation, Round, heatmap
from rig.rubric import DIMENSIONS


@dataclass
class Cell:
    text: str = ""
    values: list[str] = field(default_factory=list)  # the <data value="..."> inside it


@dataclass
class Table:
    id: str | None
    caption: str = ""
    rows: list[list[Cell]] = field(default_factory=list)

    @property
    def head(self) -> list[str]:
        return [cell.text.strip() for cell in self.rows[0]]

    def row(self, key: str) -> dict[str, Cell]:
        """The body row whose first cell reads `key`, by column name."""
        found = [r for r in self.rows[1:] if r[0].text.strip() == key]
        assert len(found) == 1, f"table {self.id}: {len(found)} rows for {key!r}"
        return dict(zip(self.head, found[0], strict=True))


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.ends: Counter[str] = Counter()
        self.chunks: list[str] = []
        self.tables: dict[str, Table] = {}
        self.data: list[tuple[str, str]] = []  # (value, text shown) of every <data>
        self.loose: list[str] = []  # the values of the <data> outside any table
        self.titles: dict[str, str] = {}  # id -> text of a <title id=...>
        self._table: Table | None = None
        self._cell: Cell | None = None
        self._caption = False
        self._data: list[str] | None = None
        self._title: str | None = None

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        self.tags.append((tag, found))
        if tag == "table":
            self._table = Table(found.get("id"))
            self.tables[found.get("id") or f"table-{len(self.tables)}"] = self._table
        elif tag == "caption":
            self._caption = True
        elif tag == "tr" and self._table is not None:
            self._table.rows.append([])
        elif tag in ("td", "th") and self._table is not None and self._table.rows:
            self._cell = Cell()
            self._table.rows[-1].append(self._cell)
        elif tag == "data":
            self._data = [found["value"], ""]
        elif tag == "title" and "id" in found:
            self._title = found["id"]
            self.titles[self._title] = ""

    def handle_endtag(self, tag: str) -> None:
        self.ends[tag] += 1
        if tag == "table":
            self._table = None
        elif tag == "caption":
            self._caption = False
        elif tag in ("td", "th"):
            self._cell = None
        elif tag == "data" and self._data is not None:
            self.data.append((self._data[0], self._data[1]))
            if self._cell is not None:
                self._cell.values.append(self._data[0])
            elif self._table is None:
                self.loose.append(self._data[0])
            self._data = None
        elif tag == "title":
            self._title = None

    def handle_data(self, data: str) -> None:
        self.chunks.append(data)
        if self._caption and self._table is not None:
            self._table.caption += data
        if self._cell is not None:
            self._cell.text += data
        if self._data is not None:
            self._data[1] += data
        if self._title is not None:
            self.titles[self._title] += data

    def starts(self, tag: str) -> list[dict[str, str]]:
        return [attrs for name, attrs in self.tags if name == tag]


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


# -- every number against the observation's --------------------------------------------


def values(cell: Cell) -> list[float]:
    return [float(value) for value in cell.values]


def numbers_compared(page: Page, obs: Observation) -> int:
    """Compare every table number with the observation's; return how many were compared."""
    assert values(Cell(values=page.loose)) == [obs.contract.get("threshold", 1.0),
                                                *(r.baseline.pass_rate for r in obs.rounds)]
    compared = len(page.loose)
    winners = page.tables["winners"]
    for at, round_ in enumerate(obs.rounds, 1):
        assert values(winners.row(round_.change)["baseline pass-rate"]) == [
            round_.baseline.pass_rate]
        compared += 1
        compared += check_round(page, at, round_)
    return compared + check_paired(page, obs)


def check_pairs(page: Page, at: int, round_: Round) -> int:
    """The round's pair matrix (issue 33): each pair above the diagonal, [difference, low,
    high], as OBSERVATION.json's `pairwise` has them."""
    table = page.tables.get(f"r{at}-pairs-table")
    if table is None:
        assert not round_.pairwise
        return 0
    shown = set(table.head[1:])
    compared = 0
    for pair in round_.pairwise:
        if pair.a in shown and pair.b in shown:
            assert values(table.row(pair.a)[pair.b]) == [pair.difference, *pair.ci95]
            assert values(table.row(pair.b)[pair.a]) == []  # the mirror holds no number
            compared += 3
    return compared


def check_paired(page: Page, obs: Observation) -> int:
    """The rank intervals and pairs across changes, as OBSERVATION.json's `paired`."""
    if obs.paired is None:
        assert "ranks-table" not in page.tables and "paired-table" not in page.tables
        return 0
    ranks, pairs = page.tables["ranks-table"], page.tables["paired-table"]
    compared = 0
    for arm, rank in obs.paired.rank_interval.items():
        row = ranks.row(arm)
        assert [values(row[k]) for k in ("rank low", "rank high", "ranked first")] == [
            [rank.low], [rank.high], [rank.first]]
        compared += 3
    for pair in heatmap.shown(obs.paired.pairs, obs.paired.arms):
        row = pairs.row(f"{pair.a} vs {pair.b}")
        assert [values(row[k]) for k in ("wins", "losses", "ties", "sign test p", "mean a - b",
                                         "95 % low", "95 % high")] == [
            [pair.wins], [pair.losses], [pair.ties], [pair.sign_p], [pair.mean_difference],
            [pair.ci95[0]], [pair.ci95[1]]]
        compared += 7
    return compared


def check_round(page: Page, at: int, round_: Round) -> int:
    compared = 0
    rates, rubric = page.tables[f"r{at}-rates-table"], page.tables[f"r{at}-rubric-table"]
    checks = page.tables.get(f"r{at}-checks-table")
    for entry in round_.arms:
        rate, row = entry.results.success, rates.row(entry.arm)
        assert [values(row[c]) for c in ("pass-rate", "95 % low", "95 % high", "samples")] == [
            [rate.pass_rate], [rate.ci95[0]], [rate.ci95[1]], [len(rate.samples)]]
        compared += 4
        for name, check in entry.results.checks.items():
            assert checks is not None
            cells = checks.row(entry.arm)
            assert (values(cells[name]), values(cells[f"{name} 95 % low"]),
                    values(cells[f"{name} 95 % high"])) == (
                [check.pass_rate], [check.ci95[0]], [check.ci95[1]])
            compared += 3
        scores, cells = entry.scores.model_dump(), rubric.row(entry.arm)
        for dim in DIMENSIONS:
            header = next(h for h in rubric.head if h.split(" ")[0] == dim)
            expected = [] if scores[dim] is None else [scores[dim]]
            assert values(cells[header]) == expected, (entry.arm, dim)
            compared += len(expected)
        assert (values(cells["total"]), values(cells["max"])) == ([entry.total], [entry.max])
        compared += 2
    return (compared + check_usage(page, at, round_) + check_pairs(page, at, round_)
            + check_headroom(page, at, round_))


def check_usage(page: Page, at: int, round_: Round) -> int:
    compared = 0
    for entry in round_.arms:
        if entry.usage is None:
            continue
        u, row = entry.usage, page.tables[f"r{at}-usage-table"].row(entry.arm)
        expected = {"requests": u.requests, "refused": sum(u.refused.values()),
                    "input": u.input, "output": u.output, "input + output": u.input + u.output,
                    "cache read": u.cache_read, "cache write": u.cache_write,
                    "reasoning": u.reasoning, "pass-rate": entry.results.success.pass_rate}
        assert {k: values(row[k]) for k in expected} == {k: [v] for k, v in expected.items()}
        assert values(row["cost"]) == ([] if u.cost_usd is None else [u.cost_usd])
        compared += len(expected) + (u.cost_usd is not None)
    for judged in round_.judge_usage:
        row, u = page.tables[f"r{at}-judge-table"].row(judged.arm), judged.usage
        assert [values(row[k]) for k in ("requests", "refused", "input", "output", "cost")] == [
            [u.requests], [sum(u.refused.values())], [u.input], [u.output], [u.cost_usd]]
        compared += 5
    return compared


def check_headroom(page: Page, at: int, round_: Round) -> int:
    """The headroom table's numbers (issue 33), for the arms whose use was read."""
    compared = 0
    for entry in round_.arms:
        h = entry.headroom
        if h is None:
            continue
        row = page.tables[f"r{at}-headroom-table"].row(entry.arm)
        expected = {"peak MiB": h.peak_mib, "limit MiB": h.limit_mib, "headroom": h.headroom,
                    "most CPU s": h.cpu_s_max}
        assert {k: values(row[k]) for k in expected} == {
            k: [] if v is None else [v] for k, v in expected.items()}
        assert values(row["samples read"]) == [h.measured, h.samples]
        compared += sum(v is not None for v in expected.values()) + 2
    return compared
