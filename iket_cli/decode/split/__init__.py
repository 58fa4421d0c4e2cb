"""The JSON export of a big process, split so that it decodes on every core: by launch (each
decodable launch exported by a worker of its own, then the parts joined), and a big launch
by CTA chunks (each chunk exported apart, then stitched back into the launch's export).

``plan`` hands the work out (slots, units, stitch jobs); ``chunks`` says which launches
split and writes each chunk's raw manifest; ``stitch`` plans a launch stitched from its
chunks and ``stitch_jobs`` writes its bytes; ``join`` merges the launches' parts byte for
byte; ``indices`` finds and rewrites table indices; ``layout`` is what the merge relies on
of the decoder's JSON; ``columns`` assembles the trace model from the parts' scans.
"""
