#include "target/ascend/simulator/l2_model.h"

#include <algorithm>
#include <bit>

namespace tw::ascend::sim {

L2Model::L2Model(int64_t capacity_bytes, int64_t line_bytes)
    : line_(std::max<int64_t>(1, line_bytes)), capacity_lines_(std::max<int64_t>(1, capacity_bytes / line_)) {}

int32_t L2Model::page_id(std::vector<int32_t>& slots, int64_t page) {
  int32_t& id = slots[static_cast<size_t>(page)];
  if (id < 0) {
    id = static_cast<int32_t>(pool_.size());
    pool_.push_back(Page{});
  }
  return id;
}

void L2Model::unlink(int32_t id) {
  Page& p = pool_[static_cast<size_t>(id)];
  if (!p.linked) return;
  if (p.prev >= 0) pool_[static_cast<size_t>(p.prev)].next = p.next; else head_ = p.next;
  if (p.next >= 0) pool_[static_cast<size_t>(p.next)].prev = p.prev; else tail_ = p.prev;
  p.prev = p.next = -1;
  p.linked = false;
}

void L2Model::make_recent(int32_t id) {
  if (head_ == id) return;
  unlink(id);
  Page& p = pool_[static_cast<size_t>(id)];
  p.next = head_;
  if (head_ >= 0) pool_[static_cast<size_t>(head_)].prev = id;
  head_ = id;
  if (tail_ < 0) tail_ = id;
  p.linked = true;
}

void L2Model::evict_to_capacity(int32_t keep) {
  while (resident_lines_ > capacity_lines_ && tail_ >= 0 && tail_ != keep) {
    int32_t id = tail_;
    resident_lines_ -= std::popcount(pool_[static_cast<size_t>(id)].lines);
    pool_[static_cast<size_t>(id)].lines = 0;
    unlink(id);
  }
}

int64_t L2Model::touch(int space, const Rect& r, int64_t space_bytes) {
  if (r.rows <= 0 || r.row_bytes <= 0 || space_bytes <= 0) return 0;
  if (space < 0) space = 0;
  if (static_cast<size_t>(space) >= slots_.size()) slots_.resize(static_cast<size_t>(space) + 1);
  std::vector<int32_t>& slots = slots_[static_cast<size_t>(space)];
  const size_t pages = static_cast<size_t>((space_bytes - 1) / line_ / kLinesPerPage + 1);
  if (slots.size() < pages) slots.resize(pages, -1);
  int64_t added = 0;
  int32_t last = -1;
  for (int64_t i = 0; i < r.rows; ++i) {
    int64_t a = std::max<int64_t>(0, r.start + i * r.stride);
    int64_t e = std::min(space_bytes, r.start + i * r.stride + r.row_bytes);  // exclusive
    if (a >= e) continue;
    for (int64_t l = a / line_, le = (e - 1) / line_; l <= le;) {
      int64_t page = l / kLinesPerPage;
      int lo = static_cast<int>(l % kLinesPerPage);
      int hi = static_cast<int>(std::min<int64_t>(le, (page + 1) * kLinesPerPage - 1) % kLinesPerPage);
      uint64_t mask = (hi == 63 ? ~uint64_t{0} : ((uint64_t{1} << (hi + 1)) - 1)) & ~((uint64_t{1} << lo) - 1);
      int32_t id = page_id(slots, page);
      Page& p = pool_[static_cast<size_t>(id)];
      int n = std::popcount(mask & ~p.lines);
      p.lines |= mask;
      added += n;
      resident_lines_ += n;
      if (id != last) make_recent(id);
      last = id;
      if (n) evict_to_capacity(id);
      l = (page + 1) * kLinesPerPage;
    }
  }
  return added;
}

int64_t L2Model::read(int space, const Rect& r, int64_t space_bytes) { return touch(space, r, space_bytes) * line_; }

void L2Model::write(int space, const Rect& r, int64_t space_bytes) { touch(space, r, space_bytes); }

}  // namespace tw::ascend::sim
