"""Where a bookie stands (api/client/topology.py TP1, bookie/location.py; docs/cluster.md
§6): the location grammar, Pulsar's rack map, the registration's properties and the script
BookKeeper's ScriptBasedMapping runs."""

from __future__ import annotations

import json
import subprocess

import pytest

from api.client.metadata_format import (decode_service_info, decode_service_info_properties,
                                       encode_service_info)
from api.client.topology import (DEFAULT_LOCATION, BadLocation, Location, conflicts,
                                 decode_rack_map, encode_rack_map, locate, parse_location,
                                 rack_map_path, topology_script)
from bookie.config import ConfigError, load_config


@pytest.mark.parametrize("text,want", [("/zone-a/rack-1", "/zone-a/rack-1"),
                                       ("/rack-1", "/default-region/rack-1"),
                                       (" /z.1/r_2 ", "/z.1/r_2")])
def test_locations_are_normalised(text, want):
    assert parse_location(text) == want


@pytest.mark.parametrize("text", ["rack-1", "/", "/a/b/c", "/a//b", "/a b/c", ""])
def test_malformed_locations_are_refused(text):
    with pytest.raises(BadLocation, match="expected /zone/rack"):
        parse_location(text)


def test_a_bad_topology_setting_is_refused_at_load(tmp_path):
    with pytest.raises(ConfigError, match="topology_location"):
        load_config(flags={"topology_location": "rack-1", "data_dir": str(tmp_path)})
    with pytest.raises(ConfigError, match="placement_min_zones"):
        load_config(flags={"placement_min_zones_per_write_quorum": 4,
                           "placement_desired_zones_per_write_quorum": 3})


def test_pulsar_s_rack_map_is_read_and_written_in_its_own_shape():
    places = {"10.0.0.1:3181": Location("/zone-a/rack-1", "host-1"),
              "10.0.0.2:3181": Location("/zone-b/rack-2", "host-2")}
    data = encode_rack_map(places)
    assert json.loads(data) == {"default": {
        "10.0.0.1:3181": {"rack": "/zone-a/rack-1", "hostname": "host-1"},
        "10.0.0.2:3181": {"rack": "/zone-b/rack-2", "hostname": "host-2"}}}
    assert decode_rack_map(data) == places


def test_a_rack_map_with_bad_entries_keeps_the_good_ones():
    data = json.dumps({"g1": {"a:1": {"rack": "/r1"}, "b:1": {"rack": "two words"},
                              "c:1": "not a dict", "d:1": {"hostname": "h"}},
                       "g2": {"e:1": {"rack": "/z/r", "hostname": "he"}}}).encode()
    assert decode_rack_map(data) == {"a:1": Location("/default-region/r1", "a"),
                                     "e:1": Location("/z/r", "he")}
    assert decode_rack_map(b"[1, 2]") == {} == decode_rack_map(b"\xff") == decode_rack_map(None)


def test_a_rack_without_its_slash_is_read_as_pulsar_reads_it():
    """`pulsar-admin bookies set-bookie-rack --rack rack1` stores "rack1"; Pulsar's getRack
    puts the "/" in front (review of issue 39: such entries were passed over)."""
    data = json.dumps({"default": {"b1:3181": {"rack": "rack1", "hostname": "h1"},
                                   "b2:3181": {"rack": "zone-a/rack2"}}}).encode()
    assert decode_rack_map(data) == {"b1:3181": Location("/default-region/rack1", "h1"),
                                     "b2:3181": Location("/zone-a/rack2", "b2")}


def test_writing_the_rack_map_keeps_the_operators_groups_and_entries():
    """Review of issue 39: `--write-rack-map` replaced /bookies whole, dropping entries set
    with pulsar-admin and Pulsar's other affinity groups."""
    existing = json.dumps({"default": {"b2:3181": {"rack": "/z/r2", "hostname": "h2"}},
                           "isolated": {"b3:3181": {"rack": "/z/r3"}}}).encode()
    merged = json.loads(encode_rack_map({"b1:3181": Location("/z/r1", "h1"),
                                         "b3:3181": Location("/z/r9", "h9")},
                                        existing=existing))
    assert merged == {"default": {"b1:3181": {"rack": "/z/r1", "hostname": "h1"},
                                  "b2:3181": {"rack": "/z/r2", "hostname": "h2"}},
                      "isolated": {"b3:3181": {"rack": "/z/r9", "hostname": "h9"}}}


@pytest.mark.parametrize("root, path", [("/ledgers", "/bookies"),
                                        ("/pulsar/ledgers", "/pulsar/bookies"),
                                        ("/a/b/ledgers/", "/a/b/bookies")])
def test_the_rack_map_sits_beside_the_ledgers_root(root, path):
    """Pulsar keeps /bookies beside /ledgers in its metadata store's root; under a chroot
    both move together."""
    assert rack_map_path(root) == path


def test_the_rack_map_beats_the_registration_which_beats_the_default():
    rack_map = {"a:1": Location("/z/map", "hm")}
    published = {"topology.location": "/z/reg", "topology.host": "hr"}
    assert locate("a:1", rack_map, published) == Location("/z/map", "hm")
    assert locate("b:1", rack_map, published) == Location("/z/reg", "hr")
    assert locate("b:1", rack_map, None) == Location(DEFAULT_LOCATION, "b")
    assert locate("b:1", {}, {"topology.location": "bad"}) == Location(DEFAULT_LOCATION, "b")


def test_the_registration_carries_the_place_beside_the_endpoints():
    data = encode_service_info("127.0.0.1", 4181, False, 3181,
                               {"topology.location": "/z/r", "topology.host": "h"})
    assert decode_service_info_properties(data) == {"topology.location": "/z/r",
                                                    "topology.host": "h"}
    assert [e[0] for e in decode_service_info(data)] == ["http", "bookie"]
    assert encode_service_info("127.0.0.1", 4181) == encode_service_info("127.0.0.1", 4181,
                                                                         properties={})


def test_the_script_answers_bookkeeper_s_scriptbasedmapping_by_address(tmp_path):
    places = {"10.0.0.1:3181": Location("/zone-a/rack-1", "h1"),
              "10.0.0.1:3182": Location("/zone-a/rack-1", "h1"),
              "10.0.0.2:3181": Location("/zone-b/rack-2", "h2")}
    script = tmp_path / "topology.sh"
    script.write_text(topology_script(places))
    done = subprocess.run(["sh", str(script), "10.0.0.2", "10.0.0.9", "10.0.0.1"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["/zone-b/rack-2", DEFAULT_LOCATION, "/zone-a/rack-1"]
    assert conflicts(places) == []
    places["10.0.0.1:3183"] = Location("/zone-c/rack-3", "h1")
    assert conflicts(places) == ["10.0.0.1"]
