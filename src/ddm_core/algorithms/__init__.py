"""Sharding algorithms: one protocol, registered by type name and by strategy id.

=====================  =====================================================  ==========  ========
type                   routes by                                              ranges      batch
=====================  =====================================================  ==========  ========
``MOD``                value mod count                                        narrows     numpy
``HASH_MOD``           xxh3_64(value) mod count (not Java hashCode)           all         numpy
``SALTED_MOD``         (id ^ salt) * salt mod count, Java-exact               all         numpy
``VOLUME_RANGE``       equal-volume integer partitions                        narrows     numpy
``BOUNDARY_RANGE``     explicit integer boundaries                            narrows     numpy
``AUTO_INTERVAL``      numbered spans of seconds (ShardingSphere-exact)       narrows     loop
``INTERVAL``           time steps → suffix-named targets                      narrows     loop
``TIME_RANGE``         explicit [start, end) → target, validated              narrows     loop
``SLOTS``              xxh3 slot → slot layout (the default)                  all         compiled
``GENE``               an id's gene bits → the same slot layout               all         compiled
``CONSISTENT_HASH``    xxh3 ring, virtual nodes, weights                      all         numpy
``COMPLEX_HASH_MOD``   combined xxh3 of several columns                       all         numpy
``INLINE``             inline expression over one column                      flag        numpy*
``COMPLEX_INLINE``     inline expression over several columns                 flag        loop
``HINT_INLINE``        inline expression over the hint value                  —           loop
=====================  =====================================================  ==========  ========

"narrows": :meth:`~ShardingAlgorithm.range` returns only the targets the
range can touch; "all": every target (the router should say so in its plan);
"flag": refused unless ``allow-range-query-with-inline-sharding`` (then all).
"numpy*": for the common ``${col % N}`` shapes. Database and table strategies
are separate algorithm instances. Props of each type: docs/configuration.md#sharding-algorithms.
"""

from ddm_core.algorithms._props import Props
from ddm_core.algorithms._targets import TargetSet
from ddm_core.algorithms.base import ShardingAlgorithm, ValueRange
from ddm_core.algorithms.registry import (
    StrategyRegistry,
    algorithm_class,
    create,
    known_types,
    register,
)

# Importing the modules registers their types.
from ddm_core.algorithms.mod import HashModAlgorithm, ModAlgorithm, SaltedModAlgorithm, java_salted_mod
from ddm_core.algorithms.range_based import BoundaryRangeAlgorithm, VolumeRangeAlgorithm
from ddm_core.algorithms.interval import AutoIntervalAlgorithm, IntervalAlgorithm, TimeRangeAlgorithm
from ddm_core.algorithms.slot_based import GeneAlgorithm, SlotsAlgorithm
from ddm_core.algorithms.consistent_hash import ConsistentHashAlgorithm
from ddm_core.algorithms.complex import ComplexHashModAlgorithm
from ddm_core.algorithms.inline import ComplexInlineAlgorithm, HintInlineAlgorithm, InlineAlgorithm

__all__ = [
    "ShardingAlgorithm",
    "ValueRange",
    "TargetSet",
    "Props",
    "register",
    "create",
    "known_types",
    "algorithm_class",
    "StrategyRegistry",
    "ModAlgorithm",
    "HashModAlgorithm",
    "SaltedModAlgorithm",
    "java_salted_mod",
    "BoundaryRangeAlgorithm",
    "VolumeRangeAlgorithm",
    "AutoIntervalAlgorithm",
    "IntervalAlgorithm",
    "TimeRangeAlgorithm",
    "SlotsAlgorithm",
    "GeneAlgorithm",
    "ConsistentHashAlgorithm",
    "ComplexHashModAlgorithm",
    "InlineAlgorithm",
    "ComplexInlineAlgorithm",
    "HintInlineAlgorithm",
]
