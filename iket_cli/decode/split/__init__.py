"""The JSON and Perfetto exports of a big process, split so that they decode on every core: by
launch (each decodable launch exported by a worker of its own, then the parts joined), and a
big launch by CTA chunks (each chunk exported apart, then stitched back into the launch's
export).

``plan`` hands the work out (slots, units, stitch jobs); ``chunks`` says which launches
split and writes each chunk's raw manifest; ``stitch`` plans a launch stitched from its
chunks and ``stitch_jobs`` writes its bytes; ``join`` merges the launches' parts byte for
byte; ``indices`` finds and rewrites table indices; ``layout`` is what the merge relies on
of the decoder's JSON; ``columns`` assembles the trace model from the parts' scans. The Perfetto export:
``pftrace_parts`` exports and describes a part, then moves it, in its worker;
``pftrace_events`` moves events and descriptors to other tracks in numpy; ``pftrace_join``
plans the whole trace's numbering and writes it; ``gzip_parts`` makes one gzip member of
pieces deflated apart.
"""
