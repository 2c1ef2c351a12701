// Ranks that behave identically, so that a per-rank simulation can run one of each.
//
// Every rank runs the same program; ranks differ only in speed (RankSpeed: a slow GPU, a slow
// host) and in which instance of each communicator they belong to (Program::channel_groups).
// rank_classes() splits the world into the coarsest partition in which all ranks of a class have
// the same speed and, for every communicator, find the same number of members of each class in
// their own group: an equitable partition, found by colour refinement (Weisfeiler-Leman, as in
// graph isomorphism testing). A collective starts when the last member of its group arrives, so
// by induction over simulated time every rank of a class has the same timeline, and simulating
// one representative per class reproduces the simulation of every rank exactly.
//
// Examples: all ranks equal -> 1 class. One slow rank, one communicator over the world -> 2
// classes. One slow rank under hybrid sharding (shard groups inside nodes, replicate groups
// across them) -> 4 classes: the slow rank, its shard-group peers, its replicate-group peers,
// everyone else.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/engine/program.hpp"

namespace fsdpsim::engine {

struct RankSpeed {
  double compute = 1.0;  // fraction of the program's GPU kernel speed (collectives excluded)
  double host = 1.0;     // fraction of the program's CPU speed (launches, host work)
  friend bool operator==(const RankSpeed&, const RankSpeed&) = default;
};

struct RankClasses {
  std::vector<std::int32_t> class_of_rank;   // per rank
  std::vector<std::int32_t> representative;  // per class: its lowest rank (classes in that order)
  std::vector<std::int32_t> size;            // per class: how many ranks it stands for
  std::vector<RankSpeed> speed;              // per class
  // peers[channel][class]: the classes present in that class's group of the channel's
  // communicator, ascending (the class itself included).
  std::vector<std::vector<std::vector<std::int32_t>>> peers;

  [[nodiscard]] std::size_t count() const { return representative.size(); }
};

// `rank_speed` has one entry per rank of the world. Throws std::invalid_argument if a channel's
// groups do not tile the world (size x stride must divide it).
RankClasses rank_classes(const std::vector<RankSpeed>& rank_speed,
                         const std::vector<RankGroups>& channel_groups);

}  // namespace fsdpsim::engine
