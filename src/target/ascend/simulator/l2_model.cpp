#include "target/ascend/simulator/l2_model.h"

#include <algorithm>
#include <bit>

namespace tw::ascend::sim {

L2Model::L2Model(int64_t capacity_bytes, int64_t line_bytes)
    : line_(std::max<int64_t>(1, line_bytes)),
      line_shift_(std::has_single_bit(static_cast<uint64_t>(line_)) ? std::countr_zero(static_cast<uint64_t>(line_)) : -1),
      capacity_lines_(std::max<int64_t>(1, capacity_bytes / line_)) {}

void L2Model::unlink(Page& p) {
  if (p.prev >= 0) pool_[static_cast<size_t>(p.prev)].next = p.next; else head_ = p.next;
  if (p.next >= 0) pool_[static_cast<size_t>(p.next)].prev = p.prev; else tail_ = p.prev;
  p.prev = p.next = kUnlinked;
}

void L2Model::make_recent(int32_t id) {
  if (head_ == id) return;
  Page& p = pool_[static_cast<size_t>(id)];
  if (p.prev != kUnlinked) unlink(p);
  p.prev = -1;
  p.next = head_;
  if (head_ >= 0) pool_[static_cast<size_t>(head_)].prev = id;
  head_ = id;
  if (tail_ < 0) tail_ = id;
}

void L2Model::evict_to_capacity(int32_t keep) {
  while (resident_lines_ > capacity_lines_ && tail_ >= 0 && tail_ != keep) {
    Page& p = pool_[static_cast<size_t>(tail_)];
    resident_lines_ -= std::popcount(p.lines);
    p.lines = 0;
    unlink(p);
  }
}

// One page's lines of a run of consecutive rows: they become resident (`added` counts the new
// ones), the page becomes the most recently used, and new lines may evict other pages.
void L2Model::apply(std::vector<int32_t>& slots, uint64_t page, uint64_t mask, int64_t& added) {
  int32_t& slot = slots[static_cast<size_t>(page)];
  if (slot < 0) {
    slot = static_cast<int32_t>(pool_.size());
    pool_.push_back(Page{});
  }
  const int32_t id = slot;
  Page& p = pool_[static_cast<size_t>(id)];
  const uint64_t fresh = mask & ~p.lines;
  p.lines |= mask;
  make_recent(id);
  if (fresh) {
    const int n = std::popcount(fresh);
    added += n;
    resident_lines_ += n;
    evict_to_capacity(id);
  }
}

// Row by row, page by page (one 64-bit mask of lines each). Consecutive touches of the same page
// (the rows of a tile that share a page) are merged into one: the same lines, the same LRU
// order, and the same evictions (the page touched is never evicted, and evicting least recently
// used pages until the lines fit after each row ends where evicting once after the last does).
int64_t L2Model::touch(int space, const Rect& r, int64_t space_bytes) {
  if (r.rows <= 0 || r.row_bytes <= 0 || space_bytes <= 0) return 0;
  if (space < 0) space = 0;
  if (static_cast<size_t>(space) >= slots_.size()) slots_.resize(static_cast<size_t>(space) + 1);
  std::vector<int32_t>& slots = slots_[static_cast<size_t>(space)];
  const size_t pages = static_cast<size_t>(line_of(space_bytes - 1) / kLinesPerPage + 1);
  if (slots.size() < pages) slots.resize(pages, -1);
  int64_t added = 0;
  constexpr uint64_t kNone = ~uint64_t{0};
  uint64_t cur_page = kNone, cur_mask = 0;  // the page being accumulated, and its lines
  auto add = [&](uint64_t page, uint64_t mask) {
    if (page == cur_page) {
      cur_mask |= mask;
      return;
    }
    if (cur_page != kNone) apply(slots, cur_page, cur_mask, added);
    cur_page = page;
    cur_mask = mask;
  };
  int64_t row = r.start;
  for (int64_t i = 0; i < r.rows; ++i, row += r.stride) {
    const int64_t a = std::max<int64_t>(0, row), e = std::min(space_bytes, row + r.row_bytes);  // [a, e)
    if (a >= e) continue;
    const uint64_t lf = line_of(a), ll = line_of(e - 1);
    uint64_t page = lf / kLinesPerPage, mask = ~uint64_t{0} << (lf % kLinesPerPage);
    for (const uint64_t pe = ll / kLinesPerPage; page < pe; ++page, mask = ~uint64_t{0}) add(page, mask);
    add(page, mask & (~uint64_t{0} >> (kLinesPerPage - 1 - ll % kLinesPerPage)));
  }
  if (cur_page != kNone) apply(slots, cur_page, cur_mask, added);
  return added;
}

int64_t L2Model::read(int space, const Rect& r, int64_t space_bytes) { return touch(space, r, space_bytes) * line_; }

void L2Model::write(int space, const Rect& r, int64_t space_bytes) { touch(space, r, space_bytes); }

}  // namespace tw::ascend::sim
