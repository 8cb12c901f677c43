// Which pages of a memory range this process ever touched, without touching the others.
//
// A sparse arena (a multi-GiB mapping written in a few places) must cost memory only where it
// was written, whatever the host's page policy. Reading an untouched page to find out that it
// holds zeros is not free: with transparent huge pages "always" (and no huge zero page, or a
// tiering daemon that collapses pages) a read fault can back 2 MiB with real memory, and a scan
// of a 5 GiB arena then makes it resident. So copying, comparing, uploading and exporting an
// arena visit only the pages the kernel says were ever mapped or swapped out
// (/proc/self/pagemap): every other page of an anonymous mapping still reads as zero.
//
// The answer is a superset of the written pages (a page read earlier counts as touched), never
// a subset: a page swapped out counts, and where pagemap cannot be read or does not answer
// truthfully (checked once against a page written and a page never touched) every page counts.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace mc::model {

// Bytes [offset, offset + size) of a range.
struct ByteSpan {
  std::int64_t offset = 0;
  std::int64_t size = 0;
  std::int64_t end() const { return offset + size; }
};

// Runs of touched pages of [data, data + size), relative to data, in order, clipped to the
// range. The whole range when pagemap is unavailable.
std::vector<ByteSpan> touched_spans(const void* data, std::int64_t size);

// Whether touched_spans answers from pagemap (false: it returns whole ranges).
bool page_map_available();

// The two ways touched_spans asks, for tests that hold them to the same answer: the kernel's
// PAGEMAP_SCAN, runs of pages at once (nullopt where the kernel lacks it or answered wrong
// when first asked), and one pagemap entry a page (the whole range where pagemap is not
// available).
std::optional<std::vector<ByteSpan>> scanned_spans(const void* data, std::int64_t size);
std::vector<ByteSpan> entry_spans(const void* data, std::int64_t size);

} // namespace mc::model
