"""Command-line flags for the MAC settings, generated from MacParams' field table
(kernels/problem.h, exposed as mactune.MacParams.FIELDS) as the C++ CLI's are
(cli/field_flags.h): one `--name` per row ('_' spelt '-'), its help, default and choices
from the row, its value checked by the row itself (MacParams' setter: type, range, choices),
so that a row added to the table is a flag of every Python tool that takes MAC settings
(mactune.calibrate_inloop) with no edit here. A row's earlier spellings (its aliases) are
flags too.

    ap = argparse.ArgumentParser()
    macflags.add(ap, skip=("tau",))           # --K, --r, --pick, --accept-eps, ...
    mac = macflags.params(ap.parse_args())    # a MacParams with every flag's value
"""

from __future__ import annotations

import argparse
from typing import Dict, Iterable, List, Optional

import mactune

DEST_PREFIX = "mac_"  # each row's value lands in args.mac_<name>


def rows() -> List[dict]:
    """The rows of MacParams' table that Python sets (FIELDS' `python` entries)."""
    return [r for r in mactune.MacParams.FIELDS if r["python"]]


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


def _parser_of(row: dict):
    """argparse `type=` for the row: the text as the row's type, then through MacParams'
    setter, so that the range and choice checks are the table's own (one line on failure)."""
    name, kind = row["name"], row["type"]

    def parse(text: str):
        try:
            value = {"integer": int, "real": float}.get(kind, str)(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"expected {'an' if kind == 'integer' else 'a'} "
                                             f"{kind}, got '{text}'") from e
        probe = mactune.MacParams()
        try:
            setattr(probe, name, value)
        except ValueError as e:  # mactune.InputError: the row's one-line refusal
            raise argparse.ArgumentTypeError(str(e)) from e
        return getattr(probe, name)

    parse.__name__ = kind  # argparse names the type in its messages
    return parse


def add(parser: argparse.ArgumentParser, *, skip: Iterable[str] = (),
        defaults: Optional[Dict[str, object]] = None,
        title: str = "MAC settings (mactune.MacParams; docs/spec.md, `mac`)") -> None:
    """A flag for every row of MacParams' table but `skip` (rows the tool sets another way),
    defaulting to `defaults[name]` where given, else to the row's default."""
    skip = set(skip)
    defaults = defaults or {}
    group = parser.add_argument_group(title)
    for row in rows():
        name = row["name"]
        if name in skip:
            continue
        default = defaults.get(name, row["default"])
        names = [flag_of(name)]
        names += [flag_of(a) for a in row.get("aliases", ()) if flag_of(a) not in names]
        if row["type"] == "boolean":
            group.add_argument(*names, dest=DEST_PREFIX + name, default=bool(default),
                               action=argparse.BooleanOptionalAction, help=row["help"])
            continue
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        # A choice's names as argparse shows choices ({a,b}); a number's row name.
        metavar = ("{" + ",".join(row["choices"]) + "}" if row["type"] == "choice"
                   else name.upper() if len(name) > 1 else name)
        group.add_argument(*names, dest=DEST_PREFIX + name, default=default,
                           type=_parser_of(row), metavar=metavar,
                           help=f"{row['help']} (default {shown})")


def params(args: argparse.Namespace, **fixed) -> mactune.MacParams:
    """MacParams from the flags `add` made, with `fixed` (the rows a tool set another way,
    by their table names) over them."""
    kw = {r["name"]: getattr(args, DEST_PREFIX + r["name"]) for r in rows()
          if hasattr(args, DEST_PREFIX + r["name"])}
    kw.update(fixed)
    return mactune.MacParams(**kw)


def point_params(point: Dict[str, object]) -> mactune.MacParams:
    """MacParams from a dict keyed by table names (a plan's point, a JSON row); a key that is
    no row is refused in one line."""
    names = {r["name"] for r in rows()}
    unknown = sorted(set(point) - names)
    if unknown:
        raise ValueError(f"MAC point: unknown setting '{unknown[0]}' (settings: "
                         f"{', '.join(r['name'] for r in rows())})")
    return mactune.MacParams(**point)
