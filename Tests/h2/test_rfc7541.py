"""RFC 7541 (HPACK) as seen by an HTTP/2 server: every decoding error is a
connection error COMPRESSION_ERROR (RFC 9113 4.3), and valid table
operations keep the dynamic table in step."""
from __future__ import annotations

import pytest

from frames import (
    COMPRESSION_ERROR, HEADER_TABLE_SIZE, encode_headers, headers_frame,
    hpack_indexed, hpack_int, hpack_literal, hpack_size_update,
)


def _pseudo(conn, target):
    return encode_headers(conn.request_headers("GET", target.path))


def _bad(conn, block, sid=1):
    conn.try_send(headers_frame(sid, block))
    conn.expect_connection_error(COMPRESSION_ERROR)


def _ok(conn, block, sid):
    conn.send(headers_frame(sid, block))
    assert conn.expect_response(sid).status == 200


def _huff_value(data: bytes) -> bytes:
    """A literal without indexing, new name x-huff, whose value is the raw
    Huffman octets ``data``."""
    return b"\x00" + hpack_int(6, 7, 0) + b"x-huff" + \
        hpack_int(len(data), 7, 0x80) + data


# -------------------------------------------------- 2.3.3 index address space

def test_rfc7541_2_3_3_indexed_field_invalid_index(conn, target):
    """RFC 7541 2.3.3: an index beyond the static and dynamic tables MUST be
    treated as a decoding error."""
    _bad(conn, _pseudo(conn, target) + hpack_indexed(70))


def test_rfc7541_2_3_3_literal_invalid_name_index(conn, target):
    """RFC 7541 2.3.3: a literal whose name index is beyond both tables MUST
    be treated as a decoding error."""
    _bad(conn, _pseudo(conn, target) +
         hpack_literal(b"", b"v", indexing="none", name_index=70))


def test_rfc7541_2_3_3_huge_index(conn, target):
    """RFC 7541 2.3.3/5.1: an index of 2^28 is out of range: decoding
    error."""
    _bad(conn, _pseudo(conn, target) + hpack_indexed(2**28))


def test_rfc7541_2_3_2_dynamic_table_spans_blocks(conn, target):
    """RFC 7541 2.3.2: an entry added by one block (incremental indexing)
    MUST be usable by the next block on the connection."""
    _ok(conn, _pseudo(conn, target) +
        hpack_literal(b"x-spans", b"blocks", indexing="incremental"), 1)
    _ok(conn, _pseudo(conn, target) + hpack_indexed(62), 3)


# ------------------------------------------------------------ 4.2 and 6.3

def test_rfc7541_4_2_size_update_at_end_of_block(conn, target):
    """RFC 7541 4.2: a dynamic table size update MUST occur at the beginning
    of the first block after a change; at the end it is a decoding
    error."""
    _bad(conn, _pseudo(conn, target) + hpack_size_update(0))


def test_rfc7541_4_2_size_update_between_fields(conn, target):
    """RFC 7541 4.2: a size update after a field representation MUST be
    treated as a decoding error."""
    p = _pseudo(conn, target)
    _bad(conn, hpack_indexed(2) + hpack_size_update(0) + p[1:])


def test_rfc7541_6_3_size_update_above_settings(conn, target):
    """RFC 7541 6.3: a new maximum size above SETTINGS_HEADER_TABLE_SIZE
    MUST be treated as a decoding error."""
    limit = conn.server_settings.get(HEADER_TABLE_SIZE, 4096)
    _bad(conn, hpack_size_update(limit + 1) + _pseudo(conn, target))


def test_rfc7541_6_3_size_update_to_settings_value_accepted(conn, target):
    """RFC 7541 6.3: a size update equal to SETTINGS_HEADER_TABLE_SIZE is
    within the limit and MUST be accepted."""
    limit = conn.server_settings.get(HEADER_TABLE_SIZE, 4096)
    _ok(conn, hpack_size_update(limit) + _pseudo(conn, target), 1)


def test_rfc7541_6_3_size_0_empties_table(conn, target):
    """RFC 7541 4.3/6.3: a size update to 0 evicts every entry; a reference
    to a former dynamic index is then a decoding error."""
    _ok(conn, _pseudo(conn, target) +
        hpack_literal(b"x-gone", b"soon", indexing="incremental"), 1)
    _bad(conn, hpack_size_update(0) + hpack_size_update(4096) +
         _pseudo(conn, target) + hpack_indexed(62), sid=3)


# ---------------------------------------------------------- 4.4 eviction

def test_rfc7541_4_4_eviction_keeps_newest(conn, target):
    """RFC 7541 4.4: with a table of 100 octets a second 50-octet entry
    evicts the first: index 62 is the newest entry and MUST decode."""
    _ok(conn, hpack_size_update(100) + _pseudo(conn, target) +
        hpack_literal(b"x-aaaaaaa", b"1", indexing="incremental") +
        hpack_literal(b"x-bbbbbbb", b"2", indexing="incremental") +
        hpack_literal(b"x-ccccccc", b"3", indexing="incremental"), 1)
    _ok(conn, _pseudo(conn, target) + hpack_indexed(62) +
        hpack_indexed(63), 3)


def test_rfc7541_4_4_evicted_index_invalid(conn, target):
    """RFC 7541 4.4/2.3.3: after eviction the table holds two 42-octet
    entries in 100 octets; index 64 no longer exists: decoding error."""
    _ok(conn, hpack_size_update(100) + _pseudo(conn, target) +
        hpack_literal(b"x-aaaaaaa", b"1", indexing="incremental") +
        hpack_literal(b"x-bbbbbbb", b"2", indexing="incremental") +
        hpack_literal(b"x-ccccccc", b"3", indexing="incremental"), 1)
    _bad(conn, _pseudo(conn, target) + hpack_indexed(64), sid=3)


def test_rfc7541_4_4_entry_larger_than_table(conn, target):
    """RFC 7541 4.4: an entry larger than the table is not an error: the
    table is emptied, the field is still decoded, and the request MUST be
    answered."""
    _ok(conn, hpack_size_update(64) + _pseudo(conn, target) +
        hpack_literal(b"x-big", b"v" * 100, indexing="incremental"), 1)


# ---------------------------------------------------------- 5.1 integers

def test_rfc7541_5_1_integer_overflow(conn, target):
    """RFC 7541 5.1: an integer encoding beyond implementation limits (here
    over 2^70) MUST be treated as a decoding error."""
    _bad(conn, _pseudo(conn, target) + b"\xff" + b"\xff" * 10 + b"\x01")


def test_rfc7541_5_1_integer_truncated(conn, target):
    """RFC 7541 5.1: an integer whose continuation bit runs past the end of
    the block MUST be treated as a decoding error."""
    _bad(conn, _pseudo(conn, target) + b"\xff\x80")


# ------------------------------------------------------ 5.2 string literals

def test_rfc7541_5_2_string_length_beyond_block(conn, target):
    """RFC 7541 5.2: a string length larger than the rest of the block MUST
    be treated as a decoding error."""
    _bad(conn, _pseudo(conn, target) + b"\x00\x06x-long\x7f\x10abc")


def test_rfc7541_5_2_huffman_padding_over_7_bits(conn, target):
    """RFC 7541 5.2: Huffman padding longer than 7 bits MUST be treated as a
    decoding error ('a' = 00011, then 11 one-bits)."""
    _bad(conn, _pseudo(conn, target) + _huff_value(b"\x1f\xff"))


def test_rfc7541_5_2_huffman_padding_zeros(conn, target):
    """RFC 7541 5.2: padding not made of the most significant bits of EOS
    (here zeros) MUST be treated as a decoding error ('a' = 00011 000)."""
    _bad(conn, _pseudo(conn, target) + _huff_value(b"\x18"))


def test_rfc7541_5_2_huffman_contains_eos(conn, target):
    """RFC 7541 5.2: a Huffman string containing the EOS symbol MUST be
    treated as a decoding error ('a', EOS, padding)."""
    _bad(conn, _pseudo(conn, target) + _huff_value(b"\x1f\xff\xff\xff\xff"))


@pytest.mark.parametrize("value", [b"a", b"h2suite",
                                   b"~^|"], ids=["one", "word", "symbols"])
def test_rfc7541_5_2_valid_huffman_accepted(conn, target, value):
    """RFC 7541 5.2/Appendix B: a correctly Huffman-coded value MUST be
    decoded and the request answered."""
    _ok(conn, _pseudo(conn, target) +
        hpack_literal(b"x-huffman", value, indexing="none", huffman=True), 1)


# ------------------------------------------------------------- 6.1

def test_rfc7541_6_1_index_0(conn, target):
    """RFC 7541 6.1: the index value 0 is not used; an indexed field with
    index 0 MUST be treated as a decoding error."""
    _bad(conn, _pseudo(conn, target) + hpack_indexed(0))


def test_rfc7541_6_2_literal_never_indexed_not_added(conn, target):
    """RFC 7541 6.2.2/6.2.3: literals without or never indexed do not touch
    the dynamic table: a later reference to index 62 is a decoding
    error."""
    _ok(conn, _pseudo(conn, target) +
        hpack_literal(b"x-none", b"1", indexing="none") +
        hpack_literal(b"x-never", b"2", indexing="never"), 1)
    _bad(conn, _pseudo(conn, target) + hpack_indexed(62), sid=3)
