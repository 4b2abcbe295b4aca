"""Contracts both sides depend on: what the client, the controller and the segment store
say to each other, and nothing else.

Pravega keeps these in ``controller:contract`` and ``segmentstore:contracts``; here:

==============================  ================================================================
module                          what
==============================  ================================================================
``records``                     the controller's public records: ``StreamInfo``,
                                ``SegmentRange``, ``EpochInfo``, ``StreamState``,
                                ``KeyHash`` (a stream's routing rule), ``TxnInfo``,
                                ``TxnStatus``, ``KeyValueTableInfo``
``controller_service``          ``ControllerService``, every call the controller answers, and
                                how callers name a call (``method_name``)
``segment_store``               values a segment container takes and returns (``ReadResult``,
                                ``TableEntry``, ``TableUpdate``, ``SegmentRole``, ...)
``segment_store_service``       ``SegmentStoreService``, every call a container answers, and
                                ``SegmentStoreClient``, its typed caller
``attributes``                  segment attributes: keys, ``AttributeUpdate`` and its verbs
``arguments``                   the checks every segment-store argument passes, on both sides
``reader_group_state``          a reader group's state: the controller writes its first value
                                (the group's record, which seeds the state segment) and checks
                                stored records with its parser; readers change it
``checkpoint_state``            the checkpoints inside a reader group's state
==============================  ================================================================

Rules: these modules import only the shared top-level modules (``errors``, ``constants``,
``naming``, ``invariant``, ``stream_configuration``, ``stream_cut``) and each other; the
client imports no server package (``storage``, ``logs``, ``btree``, ``segmentstore``,
``controller``). ``tests/unit/test_package.py`` holds both.
"""
