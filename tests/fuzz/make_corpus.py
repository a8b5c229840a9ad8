#!/usr/bin/env python3
"""Write the seed corpus of the fuzz targets (tests/fuzz/corpus/NAME/*.bin).

The seeds are committed; run this again only when a wire format changes. The layouts are those of
src/boot/boot_proto.h (little-endian structs) and src/boot/store_proto.h (big-endian), written out
here by hand: a seed that no longer matches still fuzzes, it only starts further from valid input.

usage: tests/fuzz/make_corpus.py [CORPUS_DIR]
"""
import os
import struct
import sys

ROOT_INFO_BYTES = 4108
ROOT_MAGIC, BOOT_MAGIC, BOOT_VERSION = 0x49524348, 0x42524348, 1
HELLO, TABLE, ERROR, GATHER, GATHERED, DONE = 1, 2, 3, 4, 5, 6
STORE_MAGIC, STORE_VERSION, SET, GET = 0x48435354, 1, 1, 2
STORE_TOKEN = b"hostccl-fuzz-tok"  # the token fuzz_store.c gives its server
TOKEN = bytes(range(0x10, 0x20))
AF_INET, AF_INET6 = 2, 10


def root_info(magic=ROOT_MAGIC, version=BOOT_VERSION, family=AF_INET, port=29500,
              addr=bytes([127, 0, 0, 1]), host=b"node-1", length=112):
    # The target zero-pads its input to ROOT_INFO_BYTES, so seeds stop after hc_root_wire_t (112 bytes).
    # hc_root_wire_t: magic, version, token[16], family, port, addr[16], root_pid, root_host[64]
    wire = struct.pack("<II16sHH16si64s", magic, version, TOKEN, family, port, addr.ljust(16, b"\0"),
                       4242, host[:64].ljust(64, b"\0") if len(host) < 64 else host[:64])
    return wire.ljust(length, b"\0")[:length]


def peer(host=b"node-1"):
    # hc_peer_t: host_id[32], hostname[64], pid, device
    return struct.pack("<32s64sii", bytes(range(32)), host[:64].ljust(64, b"\0") if len(host) < 64 else host[:64],
                       4243, 1)


def boot_msg(mtype, payload, magic=BOOT_MAGIC, version=BOOT_VERSION, status=0, length=None):
    # hc_boot_hdr_t: magic, version u16, type u16, status, len
    return struct.pack("<IHHII", magic, version, mtype, status, len(payload) if length is None else length) + payload


def hello(nranks=4, rank=1, host=b"node-1"):
    return struct.pack("<16sII", TOKEN, nranks, rank) + peer(host)


def store_req(rtype, key, value=b"", wait_ms=0, magic=STORE_MAGIC, version=STORE_VERSION, token=STORE_TOKEN,
              key_len=None, value_len=None):
    head = struct.pack(">IHH16sIII", magic, version, rtype, token, len(key) if key_len is None else key_len,
                       len(value) if value_len is None else value_len, wait_ms)
    return head + key + value


def seeds():
    ranks = struct.pack("<8I", 1, 3, 5, 6, 7, 9, 10, 65535)
    run = struct.pack("<200I", *range(200))
    value = bytes(range(256)) * 2
    return {
        "root_info": {
            "valid_ipv4": root_info(),
            "valid_full_length": root_info(length=ROOT_INFO_BYTES),
            "valid_ipv6": root_info(family=AF_INET6, addr=bytes(15) + b"\1"),
            "host_unterminated": root_info(host=b"h" * 64),
            "bad_magic": root_info(magic=0x12345678),
            "bad_version": root_info(version=2),
            "bad_family": root_info(family=7),
            "short": root_info(length=40),
        },
        "rendezvous": {
            "hello": boot_msg(HELLO, hello()),
            "hello_rank_out_of_range": boot_msg(HELLO, hello(rank=4)),
            "hello_nranks_zero": boot_msg(HELLO, hello(nranks=0, rank=0)),
            "hello_nranks_too_many": boot_msg(HELLO, hello(nranks=65537, rank=0)),
            "hello_host_unterminated": boot_msg(HELLO, hello(host=b"h" * 64)),
            "hello_short": boot_msg(HELLO, hello()[:100]),
            "hello_len_lies": boot_msg(HELLO, hello(), length=64),
            "gather_ranks": boot_msg(GATHER, ranks, status=512),
            "gather_run_small_text": boot_msg(GATHER, run, status=40),
            "gather_too_long": boot_msg(GATHER, bytes(4097)),
            "done": boot_msg(DONE, b""),
            # Whole sessions for the server driven end to end: a rank of one joins (the seed's
            # token is the fuzz server's), relays an all-gather and leaves; a stalled partial hello.
            "session_one_rank": boot_msg(HELLO, hello(nranks=1, rank=0)) + boot_msg(GATHER, b"abcdefgh")
            + boot_msg(DONE, b""),
            "session_partial_hello": boot_msg(HELLO, hello(nranks=1, rank=0))[:40],
            "done_with_payload": boot_msg(DONE, b"x"),
            "table_from_client": boot_msg(TABLE, b""),
            "bad_magic": boot_msg(HELLO, hello(), magic=0),
            "bad_version": boot_msg(HELLO, hello(), version=2),
        },
        "store": {
            "set_get": store_req(SET, b"hccl/root/0", value) + store_req(GET, b"hccl/root/0"),
            "overwrite": store_req(SET, b"k", b"one") + store_req(SET, b"k", b"two") + store_req(GET, b"k"),
            "get_missing_now": store_req(GET, b"missing") + store_req(SET, b"missing", b"v"),
            "get_missing_wait": store_req(GET, b"later", wait_ms=1000) + store_req(SET, b"later", b"v"),
            "wrong_token": store_req(SET, b"k", b"v", token=bytes(16)),
            "bad_version": store_req(SET, b"k", b"v", version=9),
            "not_a_store_client": b"GET /store HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n",
            "key_too_long": store_req(SET, b"k" * 257, b"v"),
            "value_too_long": store_req(SET, b"k", value_len=65537),
            "get_with_value": store_req(GET, b"k", b"v"),
            "unknown_type": store_req(3, b"k"),
            "empty_key": store_req(SET, b""),
            "key_with_space": store_req(SET, b"a b", b"v"),
            "cut_in_body": store_req(SET, b"key", b"value")[:-3],
            "cut_in_header": store_req(SET, b"key", b"value")[:20],
            "env_store_address": b"127.0.0.1:29500",
            "env_store_address_v6": b"[::1]:29500",
            "env_store_token": b"00112233445566778899AABBCCDDEEFF",
        },
    }


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    for target, files in seeds().items():
        folder = os.path.join(top, target)
        os.makedirs(folder, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(folder, name + ".bin"), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
