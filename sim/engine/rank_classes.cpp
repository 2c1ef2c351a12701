#include "sim/engine/rank_classes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>

namespace fsdpsim::engine {
namespace {

// The members of each group of one channel's communicator, as a rank -> group-index map.
struct ChannelLayout {
  std::vector<std::int32_t> group_of_rank;
  std::vector<std::vector<std::int32_t>> members;  // per group, ascending ranks
};

ChannelLayout layout_of(const RankGroups& groups, std::int32_t world) {
  const std::int32_t size = groups.size == 0 ? world : groups.size;
  const std::int32_t stride = groups.size == 0 ? 1 : groups.stride;
  if (size <= 0 || stride <= 0 || world % (static_cast<std::int64_t>(size) * stride) != 0) {
    throw std::invalid_argument(
        fmt::format("engine: groups of {} ranks {} apart do not tile a world of {} ranks", size,
                    stride, world));
  }
  ChannelLayout layout;
  layout.group_of_rank.assign(static_cast<std::size_t>(world), -1);
  const std::int32_t block = size * stride;
  for (std::int32_t base = 0; base < world; base += block) {
    for (std::int32_t offset = 0; offset < stride; ++offset) {
      std::vector<std::int32_t> members;
      for (std::int32_t k = 0; k < size; ++k) {
        const std::int32_t rank = base + offset + k * stride;
        layout.group_of_rank[static_cast<std::size_t>(rank)] =
            static_cast<std::int32_t>(layout.members.size());
        members.push_back(rank);
      }
      layout.members.push_back(std::move(members));
    }
  }
  return layout;
}

// Renumbers keys to dense colours in order of first appearance (rank order: deterministic).
template <typename Key>
std::vector<std::int32_t> colour_by(const std::vector<Key>& key_of_rank) {
  std::map<Key, std::int32_t> colour;
  std::vector<std::int32_t> out;
  out.reserve(key_of_rank.size());
  for (const Key& key : key_of_rank) {
    const auto [it, added] = colour.emplace(key, static_cast<std::int32_t>(colour.size()));
    out.push_back(it->second);
  }
  return out;
}

std::size_t colour_count(const std::vector<std::int32_t>& colours) {
  return colours.empty()
             ? 0
             : static_cast<std::size_t>(*std::max_element(colours.begin(), colours.end()) + 1);
}

}  // namespace

RankClasses rank_classes(const std::vector<RankSpeed>& rank_speed,
                         const std::vector<RankGroups>& channel_groups) {
  const auto world = static_cast<std::int32_t>(rank_speed.size());
  if (world <= 0) throw std::invalid_argument("engine: rank_classes needs at least one rank");
  std::vector<ChannelLayout> channels;
  channels.reserve(channel_groups.size());
  for (const RankGroups& g : channel_groups) channels.push_back(layout_of(g, world));

  std::vector<std::pair<double, double>> speed_key;
  speed_key.reserve(rank_speed.size());
  for (const RankSpeed& s : rank_speed) speed_key.emplace_back(s.compute, s.host);
  std::vector<std::int32_t> colour = colour_by(speed_key);

  // Refine: a rank's new colour is its colour and, per channel, the multiset of colours in its
  // group. Refinement only splits classes, so an unchanged count means a stable partition.
  for (;;) {
    std::vector<std::vector<std::int32_t>> signature(static_cast<std::size_t>(world));
    for (std::size_t r = 0; r < signature.size(); ++r) signature[r].push_back(colour[r]);
    for (const ChannelLayout& c : channels) {
      std::vector<std::vector<std::int32_t>> multiset_of_group;
      multiset_of_group.reserve(c.members.size());
      for (const auto& members : c.members) {
        std::vector<std::int32_t> m;
        m.reserve(members.size());
        for (const std::int32_t rank : members) m.push_back(colour[static_cast<std::size_t>(rank)]);
        std::sort(m.begin(), m.end());
        multiset_of_group.push_back(std::move(m));
      }
      const std::vector<std::int32_t> group_colour = colour_by(multiset_of_group);
      for (std::size_t r = 0; r < signature.size(); ++r)
        signature[r].push_back(group_colour[static_cast<std::size_t>(c.group_of_rank[r])]);
    }
    std::vector<std::int32_t> refined = colour_by(signature);
    const bool stable = colour_count(refined) == colour_count(colour);
    colour = std::move(refined);
    if (stable) break;
  }

  RankClasses out;
  out.class_of_rank = colour;
  const std::size_t n = colour_count(colour);
  out.representative.assign(n, -1);
  out.size.assign(n, 0);
  out.speed.assign(n, RankSpeed{});
  for (std::size_t r = 0; r < colour.size(); ++r) {
    const auto k = static_cast<std::size_t>(colour[r]);
    if (out.representative[k] < 0) {
      out.representative[k] = static_cast<std::int32_t>(r);
      out.speed[k] = rank_speed[r];
    }
    ++out.size[k];
  }
  out.peers.resize(channels.size());
  for (std::size_t ch = 0; ch < channels.size(); ++ch) {
    out.peers[ch].resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      const auto group = static_cast<std::size_t>(
          channels[ch].group_of_rank[static_cast<std::size_t>(out.representative[k])]);
      std::vector<std::int32_t> present;
      for (const std::int32_t rank : channels[ch].members[group])
        present.push_back(colour[static_cast<std::size_t>(rank)]);
      std::sort(present.begin(), present.end());
      present.erase(std::unique(present.begin(), present.end()), present.end());
      out.peers[ch][k] = std::move(present);
    }
  }
  return out;
}

}  // namespace fsdpsim::engine
