"""Scheduler configuration: Volcano's ``actions`` + ``tiers`` YAML, with typed plugin arguments.

Accepts Volcano's scheduler config unchanged::

    actions: "enqueue, allocate, backfill"
    tiers:
    - plugins:
      - name: gang
        enablePreemptable: false
      - name: binpack
        arguments:
          binpack.weight: 10
          binpack.resources: nvidia.com/gpu
          binpack.resources.nvidia.com/gpu: 8
    configurations:
    - name: enqueue
      arguments: {overcommit-factor: 1.2}

and validates it at load time (Volcano silently ignores a misspelt argument;
we do not). Each plugin's ``arguments`` become an instance of its
``PluginSpec.args_type``, a frozen dataclass.

Names of Volcano's own scheduler that we do not run (``volcano_names``: the
plugin ``network-topology-aware``, the argument
``predicate.DynamicResourceAllocationEnable``, the action ``shuffle`` ...) and
names not close to anything we know are accepted and listed in
``SchedulerConfig.warnings``; a name close to a known one is an error naming
the suggestion, since a typo would silently switch a feature off. A plugin
or switch name never seen anywhere is ignored, as Volcano ignores plugins it
has no builder for; an unknown action is an error, as in Volcano.

How argument keys map onto fields, and which value types are supported:
see ``pyextender.framework.plugin_args``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from pyextender.api.volcano.codec import show
from pyextender.framework import volcano_names as vn
from pyextender.framework.plugin_args import Lenient, arg, build_args, suggest
from pyextender.framework.registry import PluginAlias, PluginSpec

ACTIONS: tuple[str, ...] = ("enqueue", "allocate", "preempt", "reclaim", "backfill", "reservation")
"""Actions the sidecar performs, in the names Volcano's config uses."""

PLUGIN_OPTIONS: tuple[str, ...] = (
    "enableJobOrder",
    "enableNamespaceOrder",
    "enableHierarchy",
    "enableJobReady",
    "enableJobPipelined",
    "enableTaskOrder",
    "enablePreemptable",
    "enableReclaimable",
    "enableQueueOrder",
    "EnabledClusterOrder",  # sic: Volcano's YAML key is spelled this way
    "enablePredicate",
    "enableBestNode",
    "enableNodeOrder",
    "enableTargetJob",
    "enableReservedNodes",
    "enableJobEnqueued",
    "enabledVictim",  # sic
    "enableJobStarving",
)
"""Volcano's per-plugin switches, exactly as its YAML spells them."""


__all__ = [
    "ACTIONS",
    "PLUGIN_OPTIONS",
    "ConfigError",
    "ConfigWarning",
    "ConfigWatcher",
    "PluginConfig",
    "SchedulerConfig",
    "Tier",
    "arg",
    "build_config",
    "load_config",
    "load_config_file",
]


class ConfigError(ValueError):
    """A scheduler configuration that cannot be used; one message per problem."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigWarning:
    """A name of the config that loads as something else or is ignored."""

    kind: str
    """action, plugin, option, argument or key (top-level)."""
    name: str
    """The name as written, e.g. ``network-topology-aware``."""
    message: str
    """Where it is and why, for logs and ``validate-config``."""
    mapped_to: str = ""
    """Our name it loads as; "" when it is ignored."""

    def __str__(self) -> str:
        return self.message


# ---------------------------------------------------------------- parsed config


@dataclasses.dataclass(frozen=True, slots=True)
class PluginConfig:
    """One plugin entry of a tier: its typed arguments and Volcano's enable switches."""

    name: str
    args: Any
    """Instance of the plugin's ``PluginSpec.args_type``."""
    options: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    """Switches as written, e.g. ``{"enablePreemptable": False}``; absent means enabled."""
    written_as: str = ""
    """The alias the config used for this plugin (e.g. ``gpu-aware``), "" for its own name."""

    def enabled(self, option: str) -> bool:
        return self.options.get(option, True)


@dataclasses.dataclass(frozen=True, slots=True)
class Tier:
    """Plugins whose votes are combined before a lower tier is consulted."""

    plugins: tuple[PluginConfig, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """A validated scheduler configuration."""

    actions: tuple[str, ...]
    tiers: tuple[Tier, ...]
    configurations: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Per action name: typed arguments when an args type was given, else a plain dict."""
    warnings: tuple[ConfigWarning, ...] = ()
    """Names mapped to ours or ignored (see the module docstring), in file order."""

    @property
    def ignored(self) -> tuple[ConfigWarning, ...]:
        """The warnings for names that do nothing here."""
        return tuple(w for w in self.warnings if not w.mapped_to)

    def plugin(self, name: str) -> PluginConfig | None:
        for tier in self.tiers:
            for p in tier.plugins:
                if p.name == name:
                    return p
        return None

    @property
    def plugin_names(self) -> tuple[str, ...]:
        return tuple(p.name for t in self.tiers for p in t.plugins)


# ---------------------------------------------------------------- loading


def load_config(
    text: str,
    plugins: Mapping[str, PluginSpec],
    *,
    actions: Sequence[str] = ACTIONS,
    action_args: Mapping[str, type[Any]] | None = None,
) -> SchedulerConfig:
    """Parse and validate Volcano scheduler config YAML. Raises ConfigError listing every problem.

    ``plugins`` are the registered plugin kinds; ``action_args`` optionally
    gives a frozen-dataclass args type per action for ``configurations``.
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"not valid YAML: {exc}"]) from None
    return build_config(doc, plugins, actions=actions, action_args=action_args)


def load_config_file(
    path: str | os.PathLike[str],
    plugins: Mapping[str, PluginSpec],
    *,
    actions: Sequence[str] = ACTIONS,
    action_args: Mapping[str, type[Any]] | None = None,
) -> SchedulerConfig:
    """load_config() on a file; errors are prefixed with the file name."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    try:
        return load_config(text, plugins, actions=actions, action_args=action_args)
    except ConfigError as exc:
        raise ConfigError([f"{path}: {p}" for p in exc.problems]) from None


def build_config(
    doc: Any,
    plugins: Mapping[str, PluginSpec],
    *,
    actions: Sequence[str] = ACTIONS,
    action_args: Mapping[str, type[Any]] | None = None,
) -> SchedulerConfig:
    """Validate an already-parsed config document (see load_config)."""
    problems: list[str] = []
    warnings: list[ConfigWarning] = []
    if not isinstance(doc, Mapping):
        raise ConfigError([f"config must be a mapping with actions and tiers, got {show(doc)}"])
    top = ("actions", "tiers", "configurations")
    for key in doc:
        if key in top:
            continue
        key = str(key)
        why = vn.TOP_KEYS_IGNORED.get(key)
        if why is None and not suggest(key, [*top, *vn.TOP_KEYS_IGNORED]):
            why = "not a key of Volcano's scheduler config either"
        if why is None:
            problems.append(
                f'unknown top-level key "{key}"{suggest(key, [*top, *vn.TOP_KEYS_IGNORED])} '
                "(expected actions, tiers, configurations)"
            )
        else:
            warnings.append(ConfigWarning("key", key, f'top-level key "{key}" ignored: {why}'))
    raw_actions, inline = _inline_action_arguments(doc.get("actions"), problems)
    action_list = _actions(raw_actions, actions, problems, warnings)
    tiers = _tiers(doc.get("tiers"), plugins, problems, warnings)
    raw_confs = doc.get("configurations")
    if inline:
        raw_confs = [*inline, *(raw_confs if isinstance(raw_confs, list) else [])]
    confs = _configurations(raw_confs, actions, action_args or {}, problems, warnings)
    if problems:
        raise ConfigError(problems)
    return SchedulerConfig(
        actions=action_list, tiers=tiers, configurations=confs, warnings=tuple(warnings)
    )


def _inline_action_arguments(raw: Any, problems: list[str]) -> tuple[Any, list[Any]]:
    """Volcano also writes actions as a list of ``{name, arguments}``: (names, configurations)."""
    if not isinstance(raw, list) or not any(isinstance(a, Mapping) for a in raw):
        return raw, []
    names: list[str] = []
    confs: list[Any] = []
    for i, entry in enumerate(raw):
        if isinstance(entry, str):
            names.append(entry)
        elif isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            names.append(entry["name"])
            if entry.get("arguments") is not None:
                confs.append({"name": entry["name"], "arguments": entry["arguments"]})
        else:
            problems.append(f"actions[{i}]: must be a name or a mapping with a name")
    return names, confs


def _actions(
    raw: Any, known: Sequence[str], problems: list[str], warnings: list[ConfigWarning]
) -> tuple[str, ...]:
    if raw is None:
        problems.append('actions: required, e.g. "enqueue, allocate, backfill"')
        return ()
    if isinstance(raw, str):
        names = [a.strip() for a in raw.split(",") if a.strip()]
    elif isinstance(raw, list) and all(isinstance(a, str) for a in raw):
        names = [a.strip() for a in raw]
    else:
        problems.append(f"actions: must be a comma-separated string, got {show(raw)}")
        return ()
    if not names:
        problems.append("actions: must name at least one action")
    seen: set[str] = set()
    out: list[str] = []
    for written in names:
        name = written
        if name not in known and name in vn.ACTION_MAP and vn.ACTION_MAP[name][0] in known:
            name, how = vn.ACTION_MAP[written]
            warnings.append(
                ConfigWarning(
                    "action", written, f'actions: "{written}" loads as "{name}": {how}', name
                )
            )
        if name not in known:
            if name in vn.ACTIONS_IGNORED:
                why = vn.ACTIONS_IGNORED[name]
                warnings.append(ConfigWarning("action", name, f'actions: "{name}" ignored: {why}'))
                continue
            problems.append(
                f'actions: unknown action "{name}"{suggest(name, [*known, *vn.ACTIONS_IGNORED])} '
                f"(known: {', '.join(known)})"
            )
        elif name in seen:
            problems.append(f'actions: "{written}" is listed twice')
        else:
            out.append(name)
        seen.add(name)
    return tuple(out)


def _tiers(
    raw: Any, specs: Mapping[str, PluginSpec], problems: list[str], warnings: list[ConfigWarning]
) -> tuple[Tier, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append(f"tiers: must be a list, got {show(raw)}")
        return ()
    tiers: list[Tier] = []
    seen: dict[str, str] = {}
    for ti, tier in enumerate(raw):
        where = f"tiers[{ti}]"
        if not isinstance(tier, Mapping) or set(tier) - {"plugins"}:
            problems.append(f"{where}: must be a mapping with only a plugins list")
            continue
        entries = tier.get("plugins") or []
        if not isinstance(entries, list):
            problems.append(f"{where}.plugins: must be a list, got {show(entries)}")
            continue
        out: list[PluginConfig] = []
        for pi, entry in enumerate(entries):
            pc = _plugin(entry, f"{where}.plugins[{pi}]", specs, seen, problems, warnings)
            if pc is not None:
                out.append(pc)
        tiers.append(Tier(plugins=tuple(out)))
    return tuple(tiers)


def _plugin(
    entry: Any,
    where: str,
    specs: Mapping[str, PluginSpec],
    seen: dict[str, str],
    problems: list[str],
    warnings: list[ConfigWarning],
) -> PluginConfig | None:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
        problems.append(f"{where}: must be a mapping with a name, got {show(entry)}")
        return None
    written: str = entry["name"]
    aliases = {a.name: (spec, a) for spec in specs.values() for a in spec.aliases}
    alias: PluginAlias | None = None
    spec = specs.get(written)
    if spec is None and written in aliases:
        spec, alias = aliases[written]
    if spec is None:
        names = sorted([*specs, *aliases])
        why = vn.PLUGINS_IGNORED.get(written)
        hint = suggest(written, [*names, *vn.PLUGINS_IGNORED])
        if why is None and not hint:
            why = "not a plugin of ours nor of Volcano (Volcano skips it too)"
        if why is None:
            problems.append(
                f'{where}: unknown plugin "{written}"{hint} (known: {", ".join(names)})'
            )
        else:
            warnings.append(
                ConfigWarning("plugin", written, f'{where}: plugin "{written}" ignored: {why}')
            )
        return None
    name = spec.name
    label = name if alias is None else f"{written} = {name}"
    if name in seen:
        as_alias = "" if alias is None else f" (as {written})"
        problems.append(f'{where}: plugin "{name}"{as_alias} is already listed at {seen[name]}')
        return None
    seen[name] = where if alias is None else f"{where} (as {written})"
    options: dict[str, bool] = {}
    count = len(problems)
    for key, value in entry.items():
        if key in ("name", "arguments"):
            continue
        if key not in PLUGIN_OPTIONS:
            key = str(key)
            why = vn.OPTIONS_IGNORED.get(key)
            hint = suggest(key, [*PLUGIN_OPTIONS, *vn.OPTIONS_IGNORED])
            if why is None and not hint:
                why = "not a switch of ours nor of Volcano"
            if why is None:
                problems.append(f'{where} ({written}): unknown option "{key}"{hint}')
            else:
                warnings.append(
                    ConfigWarning(
                        "option", key, f'{where} ({written}): option "{key}" ignored: {why}'
                    )
                )
        elif not isinstance(value, bool):
            problems.append(
                f'{where} ({written}): option "{key}" must be true or false, got {show(value)}'
            )
        else:
            options[key] = value
    raw_args = entry.get("arguments")
    if alias is not None and isinstance(raw_args, Mapping):
        raw_args = {alias.arguments.get(str(k), str(k)): v for k, v in raw_args.items()}
    foreign = vn.ARGUMENTS_IGNORED.get(name, {})
    lenient = Lenient(
        ignored=lambda key: vn.ignored_argument(name, key),
        close_to=[k for k in foreign if not k.endswith(".")],
    )
    args = build_args(
        spec.args_type, raw_args, f"{where} ({label})", problems, plugin=name, lenient=lenient
    )
    warnings.extend(ConfigWarning("argument", k, m) for k, m in lenient.warnings)
    if len(problems) > count:
        return None
    return PluginConfig(
        name=name, args=args, options=options, written_as="" if alias is None else written
    )


def _configurations(
    raw: Any,
    actions: Sequence[str],
    action_args: Mapping[str, type[Any]],
    problems: list[str],
    warnings: list[ConfigWarning],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if raw is None:
        return out
    if not isinstance(raw, list):
        problems.append(f"configurations: must be a list, got {show(raw)}")
        return out
    for i, entry in enumerate(raw):
        where = f"configurations[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            problems.append(f"{where}: must be a mapping with a name, got {show(entry)}")
            continue
        name: str = entry["name"]
        extra = set(entry) - {"name", "arguments"}
        if extra:
            problems.append(f"{where} ({name}): unknown keys {sorted(map(str, extra))}")
        if name in vn.ACTION_MAP and name not in actions:
            name = vn.ACTION_MAP[name][0]
        if name not in actions:
            if name in vn.ACTIONS_IGNORED:
                warnings.append(
                    ConfigWarning(
                        "action", name, f'{where}: configuration of action "{name}" ignored'
                    )
                )
            else:
                hint = suggest(name, [*actions, *vn.ACTIONS_IGNORED])
                problems.append(f'{where}: unknown action "{name}"{hint}')
            continue
        arguments = entry.get("arguments")
        args_type = action_args.get(name)
        if args_type is not None:
            foreign = vn.ACTION_ARGUMENTS_IGNORED.get(name, {})
            lenient = Lenient(
                ignored=functools.partial(
                    vn.ignored_argument, name, tables=vn.ACTION_ARGUMENTS_IGNORED
                ),
                close_to=list(foreign),
            )
            out[name] = build_args(
                args_type, arguments, f"{where} ({name})", problems, lenient=lenient
            )
            warnings.extend(ConfigWarning("argument", k, m) for k, m in lenient.warnings)
        elif arguments is None or isinstance(arguments, Mapping):
            out[name] = dict(arguments or {})
            for key in out[name]:  # kept as written, but we know nothing reads these
                why = vn.ignored_argument(name, str(key), vn.ACTION_ARGUMENTS_IGNORED)
                if why is not None:
                    message = f'{where} ({name}): argument "{key}" ignored: {why}'
                    warnings.append(ConfigWarning("argument", str(key), message))
        else:
            problems.append(f"{where} ({name}): arguments must be a mapping, got {show(arguments)}")
    return out


# ---------------------------------------------------------------- reloading


class ConfigWatcher:
    """Reloads the config file when it changes; a bad edit keeps the last good config.

    Change is detected by polling ``os.stat`` (mtime, size, inode), which
    also catches the symlink swap of a ConfigMap volume. The first load must
    succeed (raises ConfigError); later failures go to ``on_error`` and
    ``last_error`` while ``current`` stays as it was.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        plugins: Mapping[str, PluginSpec],
        *,
        actions: Sequence[str] = ACTIONS,
        action_args: Mapping[str, type[Any]] | None = None,
        on_change: Callable[[SchedulerConfig], None] | None = None,
        on_error: Callable[[ConfigError], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self._plugins = plugins
        self._actions = actions
        self._action_args = action_args
        self._on_change = on_change
        self._on_error = on_error
        self._stamp = self._stat()
        self.current: SchedulerConfig = self._load()
        self.last_error: ConfigError | None = None
        self.generation = 1
        """Bumped on every successful (re)load."""

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _load(self) -> SchedulerConfig:
        return load_config_file(
            self.path, self._plugins, actions=self._actions, action_args=self._action_args
        )

    def poll(self) -> bool:
        """Reload if the file changed. True when a new config was applied."""
        stamp = self._stat()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            config = self._load()
        except ConfigError as exc:
            self.last_error = exc
            if self._on_error is not None:
                self._on_error(exc)
            return False
        self.current = config
        self.last_error = None
        self.generation += 1
        if self._on_change is not None:
            self._on_change(config)
        return True

    async def run(self, interval: float = 1.0, stop: asyncio.Event | None = None) -> None:
        """Poll every ``interval`` seconds until ``stop`` is set (or the task is cancelled)."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            self.poll()
            # asyncio.timeout, not wait_for: wait_for on 3.11 can swallow a cancel
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await stop.wait()
