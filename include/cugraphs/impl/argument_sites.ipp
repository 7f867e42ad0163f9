// The bodies of the functions <cugraphs/detail/argument_sites.hpp> declares: included at its end in
// header-only builds, compiled once into the cugraphs library when
// CUGRAPHS_SEPARATE_COMPILATION is defined (config.hpp).
#pragma once

#include <cugraphs/detail/argument_sites.hpp>
#include <cugraphs/config.hpp>

namespace cugraphs::detail {

CUGRAPHS_INLINE std::optional<std::string> ArgumentSites::find(cudaGraph_t g,
    const std::vector<ConditionalMade>& conditionals, std::string_view op) {
  if (rec_.sources != nullptr && rec_.leaves > StageArgs::kInlineLeaves)
    return format("the staging copy takes at most {} input leaves as arguments and this callable stages {}",
                  StageArgs::kInlineLeaves, rec_.leaves);
  const auto nodes = graph_nodes(g, op);
  std::vector<PatchedNode> found;
  std::vector<bool> seen(rec_.draws.size(), false);
  std::optional<std::string> elsewhere;  // how a draw may reach the device other than as patched arguments
  std::optional<std::string> unbound;    // inputs read in place: how a static input is reached otherwise
  bool staged = false;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    cudaGraphNodeType t{};
    if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess) {
      if (rec_.in_place && !unbound) unbound = format("node {} is of a type CUDA cannot say", i);
      continue;
    }
    auto args = t == cudaGraphNodeTypeKernel ? KernelArgs::read(nodes[i]) : std::nullopt;
    cudaFunction_t function = nullptr;  // for a kernel only the driver can read
    if (!args && !rec_.draws.empty() && !elsewhere) elsewhere = draw_elsewhere(nodes[i], false, conditionals, op);
    if (!args && rec_.in_place && t == cudaGraphNodeTypeKernel)
      if (auto driver = read_driver_kernel(nodes[i])) {
        // A library's kernel (cuBLAS): a static input's address among its arguments is rebound
        // through the driver like any other (draws there are refused above).
        args.emplace(std::move(driver->args));
        function = driver->function;
      }
    if (!args) {
      if (rec_.in_place && !unbound) unbound = reaches_statics(nodes[i], i, false, conditionals, op);
      continue;
    }
    PatchedNode n{i, nodes[i], nullptr, std::move(*args), {}, {}, {}};
    n.function = function;
    find_sites(n);
    if (rec_.in_place && !unbound && !n.stage)
      for (const auto& q : n.args.params())
        if (auto why = hidden_reach({n.args.bytes() + q.offset, q.size}); why && !unbound)
          unbound = format("node {} ({}) {}", i, describe_node(nodes[i]), *why);
    if (n.draws.empty() && !n.stage && n.leaves.empty()) continue;
    for (const auto& site : n.draws)
      for (std::size_t d = 0; d < rec_.draws.size(); ++d)
        if (rec_.draws[d].generator == site.draw.generator && rec_.draws[d].offset == site.draw.offset) seen[d] = true;
    staged = staged || n.stage.has_value();
    found.push_back(std::move(n));
  }
  (void)cudaGetLastError();
  for (std::size_t d = 0; d < rec_.draws.size(); ++d)
    if (!seen[d])
      return format("draw {} of the capture (generator {} of the graph, offset {}) does not reach its kernel as a "
                    "kernel argument (it is passed through memory, to a kernel whose arguments CUDA cannot lay "
                    "out, or not used)",
                    d, rec_.draws[d].generator, rec_.draws[d].offset);
  if (elsewhere) return *elsewhere + ", which only the ring refreshes";
  if (rec_.sources != nullptr && rec_.leaves != 0 && !staged)
    return std::string("the staging copy's arguments were not found in the graph");
  if (unbound) return *unbound;
  patched_ = std::move(found);
  return std::nullopt;
}

CUGRAPHS_INLINE std::optional<unsigned> ArgumentSites::unread_leaf(cudaGraph_t g,
    const std::vector<ConditionalMade>& conditionals, std::span<const Range> collectives, std::string_view op) const {
  RelaxedCaptureMode relaxed;  // queries, but a capture may be open on this thread
  std::vector<bool> read(rec_.statics.size());
  for (std::size_t i = 0; i < read.size(); ++i) read[i] = rec_.statics[i].bytes == 0;
  const auto all_read = [&] { return std::ranges::all_of(read, [](bool r) { return r; }); };
  // A copy or memset reaches the bytes it spans; an argument word the input's bytes, one past
  // its end, or a one-based base just before it (not the read-in-place pads: in a pool the
  // next buffer may start within them).
  const auto mark_range = [&, this](const void* p, std::size_t bytes) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    for (std::size_t i = 0; i < read.size(); ++i) {
      const auto base = reinterpret_cast<std::uintptr_t>(rec_.statics[i].dst);
      if (p != nullptr && a < base + rec_.statics[i].bytes && base < a + std::max<std::size_t>(bytes, 1)) read[i] = true;
    }
  };
  const auto mark_words = [&, this](std::span<const std::byte> bytes) {
    for (std::size_t at = 0; at + 8 <= bytes.size(); at += 8) {
      std::uint64_t w = 0;
      std::memcpy(&w, bytes.data() + at, sizeof w);
      for (std::size_t i = 0; i < read.size(); ++i) {
        const auto base = reinterpret_cast<std::uintptr_t>(rec_.statics[i].dst);
        if (w + kBaseSlack >= base && w <= base + rec_.statics[i].bytes) read[i] = true;
      }
    }
  };
  for (const auto& [at, bytes] : collectives) mark_range(reinterpret_cast<const void*>(at), bytes);
  // Twice at most: the words alone, then (for leaves still unread) what they name, which
  // costs a query a word.
  for (const bool deep : {false, true}) {
    if (all_read()) return std::nullopt;
    const bool known = walk_nodes(
        g, conditionals, op,
        [&, this](std::span<const std::span<const std::byte>> params) {
          if (std::ranges::any_of(params, [this](std::span<const std::byte> b) { return is_stage_args(b); }))
            return true;
          for (const auto bytes : params) {
            mark_words(bytes);
            if (deep) {
              if (const auto leaf = texture_leaf(bytes)) read[*leaf] = true;
              if (const auto leaf = table_in(bytes)) read[*leaf] = true;
            }
          }
          return true;
        },
        [&, this](const cudaMemcpy3DParms& p) {
          if (p.srcArray == nullptr) mark_range(p.srcPtr.ptr, copy_extent(p, p.srcPtr, p.srcPos));
          if (p.dstArray == nullptr) mark_range(p.dstPtr.ptr, copy_extent(p, p.dstPtr, p.dstPos));
          if (!deep || p.srcArray != nullptr) return true;
          // Host memory's words as the host holds them now (a table of addresses, a bindless
          // table of textures); memory that cannot be searched may hold an address.
          if (const auto host = host_source(p); host && host->searched) {
            mark_words(host->words);
            if (host->words.size() <= kTableSearched)
              if (const auto leaf = texture_leaf(host->words)) read[*leaf] = true;
            return true;
          } else {
            return !host && (p.kind == cudaMemcpyDeviceToDevice || p.kind == cudaMemcpyDeviceToHost ||
                             !plain_pageable(p.srcPtr.ptr, {}));
          }
        },
        [&](const cudaMemsetParams& p) {
          mark_range(p.dst, std::max(p.pitch, p.width * p.elementSize) * std::max<std::size_t>(p.height, 1));
        });
    (void)cudaGetLastError();  // a query's own error
    if (!known) return std::nullopt;
  }
  for (std::size_t i = 0; i < read.size(); ++i)
    if (!read[i]) return static_cast<unsigned>(i);
  return std::nullopt;
}

CUGRAPHS_INLINE std::optional<unsigned> ArgumentSites::unreached_generator(cudaGraph_t g,
    const std::vector<ConditionalMade>& conditionals, std::string_view op) const {
  RelaxedCaptureMode relaxed;  // queries, but a capture may be open on this thread
  // A draw reaches the device only through its device words' address (PhiloxArgs::base):
  // as a kernel argument, or in host memory a copy carries to the device.
  std::vector<bool> reached(rec_.generators, false);
  const auto words = reinterpret_cast<std::uintptr_t>(rec_.words);
  const auto mark_words = [&, this](std::span<const std::byte> bytes) {
    for (std::size_t at = 0; at + 8 <= bytes.size(); at += 8) {
      std::uint64_t w = 0;
      std::memcpy(&w, bytes.data() + at, sizeof w);
      if (w >= words && w < words + 16 * rec_.generators) reached[(w - words) / 16] = true;
    }
  };
  const bool known = walk_nodes(
      g, conditionals, op,
      [&](std::span<const std::span<const std::byte>> params) {
        for (const auto bytes : params) mark_words(bytes);
        return true;
      },
      [&](const cudaMemcpy3DParms& p) {
        // Device memory holds a draw's PhiloxArgs only where a kernel that took them wrote them
        // (or the program wrote them outside the graph while it was captured: not judged).
        if (p.srcArray != nullptr) return true;
        const auto host = host_source(p);
        if (host && host->searched) mark_words(host->words);
        return host ? host->searched : !plain_pageable(p.srcPtr.ptr, {});
      },
      [](const cudaMemsetParams&) {});
  (void)cudaGetLastError();
  if (!known) return std::nullopt;
  for (unsigned i = 0; i < rec_.generators; ++i)
    if (!reached[i] && std::ranges::any_of(rec_.draws, [i](const DrawMade& d) { return d.generator == i; })) return i;
  return std::nullopt;
}

CUGRAPHS_INLINE std::optional<std::pair<std::uint64_t, std::uint64_t>> eager_draw_taken(
    cudaGraph_t g, const std::vector<ConditionalMade>& conditionals, std::string_view op) noexcept {
  const EagerDraws& eager = tls_eager_draws;
  if (eager.made == 0) return std::nullopt;
  const std::size_t kept = std::min(eager.made, EagerDraws::kKept);
  RelaxedCaptureMode relaxed;  // queries, but a capture may be open on this thread
  std::optional<std::pair<std::uint64_t, std::uint64_t>> found;
  CUGRAPHS_TRY {
    (void)walk_nodes(
        g, conditionals, op,
        [&](std::span<const std::span<const std::byte>> params) {
          // A PhiloxArgs passed by value, as a parameter of its own or a member of one (a
          // sampling struct holding it beside a temperature): 24 bytes at an 8-byte step, the
          // seed, the offset and no device words. Only that shape is judged, so other arguments
          // that happen to hold the same numbers (a count, a null pointer) are not taken for a
          // draw; a seed and an offset passed as two parameters of their own are not judged.
          for (const auto a : params) {
            for (std::size_t at = 0; at + 3 * sizeof(std::uint64_t) <= a.size(); at += sizeof(std::uint64_t)) {
              std::uint64_t w[3];
              std::memcpy(w, a.data() + at, sizeof w);
              if (w[2] != 0 || (w[0] == 0 && w[1] == 0)) continue;  // all zeros: any zeroed struct
              for (std::size_t i = 0; i < kept && !found; ++i)
                if (eager.kept[i] == std::pair{w[0], w[1]}) found = eager.kept[i];
              if (found) return false;  // stops the walk
            }
          }
          return true;
        },
        [](const cudaMemcpy3DParms&) { return true; }, [](const cudaMemsetParams&) {});
  } CUGRAPHS_CATCH_ALL {
    found.reset();  // a graph that cannot be read is not judged
  }
  (void)cudaGetLastError();
  return found;
}

CUGRAPHS_INLINE bool ArgumentSites::takes_placeholder(cudaGraph_t g, const std::vector<ConditionalMade>& conditionals,
                                                      unsigned generator, std::string_view op) const {
  RelaxedCaptureMode relaxed;  // queries, but a capture may be open on this thread
  // The generator's placeholder seed as a plain number: its low 4 bytes at a 4-byte step, which
  // finds a 32-bit seed parameter and the 64-bit seed alike (its low half, little-endian). A
  // whole PhiloxArgs of this generator would hold it too, but then the generator is reached
  // and this is not asked.
  const auto narrow = static_cast<std::uint32_t>(captured_seed(generator));
  bool found = false;
  (void)walk_nodes(
      g, conditionals, op,
      [&](std::span<const std::span<const std::byte>> params) {
        for (const auto a : params) {
          for (std::size_t at = 0; !found && at + 4 <= a.size(); at += 4) {
            std::uint32_t w = 0;
            std::memcpy(&w, a.data() + at, 4);
            found = w == narrow;
          }
          if (found) break;
        }
        return !found;  // stops the walk once found
      },
      [](const cudaMemcpy3DParms&) { return true; }, [](const cudaMemsetParams&) {});
  (void)cudaGetLastError();
  return found;
}

CUGRAPHS_INLINE void ArgumentSites::ready(cudaGraph_t g, std::string_view op) {
  if (rec_.sources != nullptr) done_ = add_end_event(g, graph_sinks(g, op), op);
  for (PatchedNode& n : patched_) {
    // The node's kernel function, found now, on the capture's device, for the updates of every
    // launch (which may come while another device is current).
    if (n.args.launch().func != nullptr) n.function = kernel_function(n.args.launch().func);  // else the driver's
    if (!n.stage) continue;
    StageArgs a;
    std::memcpy(&a, n.args.bytes() + *n.stage, sizeof a);
    a.control = nullptr;
    for (auto& src : a.inline_sources) src = nullptr;
    std::memcpy(n.args.bytes() + *n.stage, &a, sizeof a);
    check(cudaGraphKernelNodeSetParams(n.node, &n.args.launch()), "{}: cudaGraphKernelNodeSetParams (staging copy)", op);
  }
  staged_.assign(rec_.leaves, 0);
  committed_.assign(rec_.leaves, 0);
  stage_sources_.assign(rec_.leaves, 0);
}

CUGRAPHS_INLINE void ArgumentSites::wait(std::string_view op) noexcept { wait_end_event(done_.get(), op); }

CUGRAPHS_INLINE std::optional<DrawMade> ArgumentSites::draw_at(const std::byte* at) const noexcept {
  std::uint64_t w[3];
  std::memcpy(w, at, sizeof w);
  const auto words = reinterpret_cast<std::uintptr_t>(rec_.words);
  if (w[2] < words || w[2] >= words + 16 * rec_.generators || (w[2] - words) % 16 != 0) return std::nullopt;
  const auto generator = static_cast<unsigned>((w[2] - words) / 16);
  if (w[0] != captured_seed(generator)) return std::nullopt;
  return DrawMade{generator, w[1]};
}

CUGRAPHS_INLINE void ArgumentSites::find_sites(PatchedNode& n) const {
  n.draws.clear();
  n.stage.reset();
  for (const auto& q : n.args.params())
    (void)each_draw({n.args.bytes() + q.offset, q.size}, [&](std::size_t at, DrawMade d) {
      n.draws.push_back({q.offset + at, d});
      return false;
    });
  n.leaves.clear();
  if (rec_.sources == nullptr) return;
  for (const auto& q : n.args.params())
    if (is_stage_args({n.args.bytes() + q.offset, q.size})) n.stage = q.offset;
  if (!rec_.in_place || n.stage) return;
  for (const auto& q : n.args.params())
    for (std::size_t at = 0; at + 8 <= q.size; at += 8) {
      std::uint64_t w = 0;
      std::memcpy(&w, n.args.bytes() + q.offset + at, sizeof w);
      if (const auto leaf = leaf_at(w))
        n.leaves.push_back({q.offset + at, *leaf, w - reinterpret_cast<std::uintptr_t>(rec_.statics[*leaf].dst)});
    }
}

CUGRAPHS_INLINE bool ArgumentSites::is_stage_args(std::span<const std::byte> bytes) const noexcept {
  if (rec_.sources == nullptr || bytes.size() != sizeof(StageArgs)) return false;
  StageArgs a;
  std::memcpy(&a, bytes.data(), sizeof a);
  return a.sources == rec_.sources && a.leaves == rec_.leaves;
}

CUGRAPHS_INLINE std::optional<unsigned> ArgumentSites::leaf_at(std::uint64_t w) const noexcept {
  // Read in place, a static input has kInPlacePad bytes of its own buffer on either side, and
  // an address there (x - 1 as a one-based base) is the input's too; but not the buffer's first
  // byte (another buffer may end there) nor one past its last (another may start there).
  const std::uintptr_t pad = rec_.in_place ? kInPlacePad : 0;
  for (std::size_t i = 0; i < rec_.statics.size(); ++i) {
    const auto base = reinterpret_cast<std::uintptr_t>(rec_.statics[i].dst);
    const auto bytes = rec_.statics[i].bytes;
    if (pad != 0 ? w > base - pad && w < base + bytes + pad : w >= base && w - base <= bytes)
      return static_cast<unsigned>(i);
  }
  return std::nullopt;
}

CUGRAPHS_INLINE std::optional<unsigned> ArgumentSites::leaf_in(std::span<const std::byte> bytes) const noexcept {
  for (std::size_t at = 0; at + 8 <= bytes.size(); at += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, bytes.data() + at, sizeof w);
    if (const auto leaf = leaf_at(w)) return leaf;
  }
  return std::nullopt;
}

CUGRAPHS_INLINE std::optional<unsigned> ArgumentSites::texture_leaf(std::span<const std::byte> bytes) const noexcept {
  RelaxedCaptureMode relaxed;  // a query, but a capture may be open on this thread
  for (std::size_t at = 0; at + 8 <= bytes.size(); at += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, bytes.data() + at, sizeof w);
    if (w == 0 || leaf_at(w)) continue;
    cudaResourceDesc d{};
    if (cudaGetTextureObjectResourceDesc(&d, static_cast<cudaTextureObject_t>(w)) != cudaSuccess) {
      (void)cudaGetLastError();  // not a texture object: most words are not
      continue;
    }
    std::optional<unsigned> leaf;
    if (d.resType == cudaResourceTypeLinear)
      leaf = leaf_overlapped(d.res.linear.devPtr, d.res.linear.sizeInBytes);
    else if (d.resType == cudaResourceTypePitch2D)
      leaf = leaf_overlapped(d.res.pitch2D.devPtr, d.res.pitch2D.pitchInBytes * d.res.pitch2D.height);
    if (leaf) return leaf;
  }
  return std::nullopt;
}

CUGRAPHS_INLINE std::optional<unsigned> ArgumentSites::table_leaf(std::uint64_t w) const noexcept {
  if (w == 0 || w % 8 != 0 || leaf_at(w)) return std::nullopt;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, reinterpret_cast<const void*>(w)) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  if (a.type == cudaMemoryTypeManaged) {
    int concurrent = 0;
    if (cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, a.device) != cudaSuccess) {
      (void)cudaGetLastError();
      return std::nullopt;
    }
    if (concurrent == 0) return std::nullopt;  // the host must not touch it while kernels run
  } else if (a.type != cudaMemoryTypeHost || a.hostPointer == nullptr) {
    return std::nullopt;
  }
  const auto first = reinterpret_cast<std::uintptr_t>(a.type == cudaMemoryTypeHost ? a.hostPointer
                                                                                    : reinterpret_cast<void*>(w));
  constexpr std::uintptr_t kPage = 4096;
  std::uintptr_t end = (first / kPage + 1) * kPage;  // the byte's own page is mapped
  using AddressRange = int (*)(unsigned long long* base, std::size_t* size, unsigned long long p);
  static const auto range = reinterpret_cast<AddressRange>(quiet_driver_entry_point("cuMemGetAddressRange", 12000));
  unsigned long long base = 0;
  std::size_t size = 0;
  if (range != nullptr && range(&base, &size, w) == 0 && base <= w && w - base < size)
    end = first + std::min<std::size_t>(size - (w - base), kTableSearched);
  for (std::uintptr_t at = first; at + 8 <= end; at += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, reinterpret_cast<const void*>(at), sizeof word);
    if (const auto leaf = leaf_at(word)) return leaf;
  }
  return std::nullopt;
}

CUGRAPHS_INLINE std::optional<unsigned> ArgumentSites::table_in(std::span<const std::byte> bytes) const noexcept {
  RelaxedCaptureMode relaxed;  // queries, but a capture may be open on this thread
  for (std::size_t at = 0; at + 8 <= bytes.size(); at += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, bytes.data() + at, sizeof w);
    if (const auto leaf = table_leaf(w)) return leaf;
  }
  return std::nullopt;
}

CUGRAPHS_INLINE std::optional<std::string> ArgumentSites::hidden_reach(std::span<const std::byte> bytes) const {
  if (const auto leaf = texture_leaf(bytes))
    return format("takes a texture object over static input leaf {}, which holds the address it was made with (no "
                  "call can rebind it)",
                  *leaf);
  if (const auto leaf = table_in(bytes))
    return format("takes the address of pinned host or managed memory that holds the address of static input leaf {} "
                  "(a table written on the host while f was captured, which no call can rebind; hand the input to "
                  "the kernel as an argument)",
                  *leaf);
  return std::nullopt;
}

CUGRAPHS_INLINE std::optional<unsigned> ArgumentSites::leaf_overlapped(const void* p, std::size_t bytes) const noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  for (std::size_t i = 0; i < rec_.statics.size(); ++i) {
    const auto base = reinterpret_cast<std::uintptr_t>(rec_.statics[i].dst);
    if (a < base + rec_.statics[i].bytes + 1 && base < a + std::max<std::size_t>(bytes, 1)) return static_cast<unsigned>(i);
  }
  return std::nullopt;
}

CUGRAPHS_INLINE std::optional<std::string> ArgumentSites::reaches_statics(cudaGraphNode_t node, std::size_t i,
    bool nested, const std::vector<ConditionalMade>& conditionals, std::string_view op) const {
  const std::string where = nested ? std::string("a node inside a conditional body or a child graph")
                                   : format("node {}", i);
  cudaGraphNodeType t{};
  if (cudaGraphNodeGetType(node, &t) != cudaSuccess) return where + ", of a type CUDA cannot say";
  const auto names = [](unsigned leaf) { return format("static input leaf {}", leaf); };
  switch (t) {
    case cudaGraphNodeTypeKernel: {
      const auto bytes_of = kernel_param_bytes(node);
      if (!bytes_of)
        return format("{} ({}) is a kernel whose arguments CUDA cannot read (they might hold a static input's "
                      "address)", where, describe_node(node));
      const auto params = bytes_of->spans();
      for (const auto bytes : params)
        if (const auto leaf = leaf_in(bytes))
          return bytes_of->runtime ? format("{} ({}) takes the address of {}, and nodes there cannot be set at each call", where,
                               describe_node(node), names(*leaf))
                      : format("{} ({}) takes the address of {} among the arguments of a kernel this runtime cannot "
                               "set (launched through the driver API, by a library such as cuBLAS)",
                               where, describe_node(node), names(*leaf));
      for (const auto bytes : params)
        if (auto why = hidden_reach(bytes)) return format("{} ({}) {}", where, describe_node(node), *why);
      return std::nullopt;
    }
    case cudaGraphNodeTypeMemcpy: {
      cudaMemcpy3DParms p{};
      if (cudaGraphMemcpyNodeGetParams(node, &p) != cudaSuccess) return where + ", a copy CUDA cannot describe";
      if (p.srcArray == nullptr)
        if (const auto leaf = leaf_overlapped(p.srcPtr.ptr, copy_extent(p, p.srcPtr, p.srcPos)))
          return format("{} is a copy that reads {}", where, names(*leaf));
      if (p.dstArray == nullptr)
        if (const auto leaf = leaf_overlapped(p.dstPtr.ptr, copy_extent(p, p.dstPtr, p.dstPos)))
          return format("{} is a copy that writes {}", where, names(*leaf));
      const bool from_host = p.kind != cudaMemcpyDeviceToDevice && p.kind != cudaMemcpyDeviceToHost;
      if (from_host && p.srcArray == nullptr && plain_pageable(p.srcPtr.ptr, rec_.shield))
        return format("{} copies {} bytes from plain pageable host memory (host address {}), which cugraphs cannot "
                      "search for a static input's address (a table of them there would keep the static inputs'); "
                      "copy from pinned memory",
                      where, copy_extent(p, p.srcPtr, p.srcPos), p.srcPtr.ptr);
      if (const auto host = host_source(p)) {
        if (!host->searched)
          return format("{} copies {} bytes from host memory, more than cugraphs searches for a static input's "
                        "address (64 MiB)", where, host->bytes);
        if (const auto leaf = leaf_in(host->words))
          return format("{} copies the address of {} from host memory to the device", where, names(*leaf));
        // A bindless table of texture objects: one query a word, so only tables of a size
        // such tables have.
        if (host->words.size() <= kTableSearched)
          if (const auto leaf = texture_leaf(host->words))
            return format("{} copies a texture object over {} from host memory to the device", where, names(*leaf));
      }
      (void)cudaGetLastError();
      return std::nullopt;
    }
    case cudaGraphNodeTypeMemset: {
      cudaMemsetParams p{};
      if (cudaGraphMemsetNodeGetParams(node, &p) != cudaSuccess) return where + ", a memset CUDA cannot describe";
      const std::size_t bytes = std::max(p.pitch, p.width * p.elementSize) * (std::max<std::size_t>(p.height, 1) - 1) +
                                p.width * p.elementSize;
      if (const auto leaf = leaf_overlapped(p.dst, bytes)) return format("{} is a memset of {}", where, names(*leaf));
      return std::nullopt;
    }
    case cudaGraphNodeTypeGraph:
#if CUGRAPHS_HAS_CONDITIONAL_NODES
    case cudaGraphNodeTypeConditional:
#endif
      return first_nested(node, t, conditionals, op, where + ", ", [&, this](cudaGraphNode_t n) {
        return reaches_statics(n, i, true, conditionals, op);
      });
    case cudaGraphNodeTypeEmpty:
    case cudaGraphNodeTypeHost:
    case cudaGraphNodeTypeWaitEvent:
    case cudaGraphNodeTypeEventRecord:
    case cudaGraphNodeTypeExtSemaphoreSignal:
    case cudaGraphNodeTypeExtSemaphoreWait:
    case cudaGraphNodeTypeMemAlloc:
    case cudaGraphNodeTypeMemFree:
      return std::nullopt;  // reads and writes no device memory of the graph's kernels
    default:
      return format("{} is a {} node, which may reach memory in ways cugraphs cannot see", where, node_type_name(t));
  }
}

CUGRAPHS_INLINE bool ArgumentSites::judge_inputs() noexcept {
  const auto copied = [this](std::uintptr_t a, std::size_t bytes) {
    if (a % kInPlaceAlignment != 0) return true;
    for (const Range& r : rec_.shield)
      if (a < r.first + r.second && r.first < a + bytes) return true;
    return false;
  };
  bool any = false;
  leaves_in_place_ = 0;
  for (std::size_t i = 0; i < committed_.size(); ++i) {
    const std::uintptr_t a = committed_[i];  // 0: the static input itself, or an empty one
    const bool copy = a != 0 && copied(a, rec_.statics[i].bytes);
    stage_sources_[i] = copy ? a : 0;
    any = any || copy;
    leaves_in_place_ += a != 0 && !copy ? 1 : 0;
  }
  return any;
}

CUGRAPHS_INLINE void ArgumentSites::enable_staging(cudaGraphExec_t exec, bool enabled, std::string_view op) {
  if (staging_enabled_ == enabled) return;
  const auto stage = std::ranges::find_if(patched_, [](const PatchedNode& n) { return n.stage.has_value(); });
  if (stage == patched_.end()) return;  // nothing staged (no input leaves)
  staging_enabled_.reset();  // unknown until the call below has succeeded
  if (const cudaError_t e = cudaGraphNodeSetEnabled(exec, stage->target, enabled ? 1 : 0); e != cudaSuccess) [[unlikely]]
    throw_cuda(e, format("{}: {} the staging copy (cudaGraphNodeSetEnabled)", op, enabled ? "enabling" : "disabling"));
  staging_enabled_ = enabled;
}

CUGRAPHS_INLINE void ArgumentSites::set_nodes(cudaGraphExec_t exec, Taken taken, std::string_view op) {
  committed_.swap(staged_);
  if (!rec_.in_place) {
    for (PatchedNode& n : patched_) set_node(exec, n, taken, op);
    return;
  }
  if (!judge_inputs()) {
    for (PatchedNode& n : patched_)
      if (!n.stage) set_node(exec, n, taken, op);  // the staging node, disabled, is left as it is
    enable_staging(exec, false, op);
    return;
  }
  for (PatchedNode& n : patched_)
    if (n.stage) set_node(exec, n, taken, op);
  enable_staging(exec, true, op);
  for (PatchedNode& n : patched_)
    if (!n.stage) set_node(exec, n, taken, op);
}

CUGRAPHS_INLINE std::size_t ArgumentSites::copy_extent(const cudaMemcpy3DParms& p, const cudaPitchedPtr& q,
                                                       const cudaPos& at) noexcept {
  const std::size_t height = std::max<std::size_t>(p.extent.height, 1), depth = std::max<std::size_t>(p.extent.depth, 1);
  const std::size_t pitch = std::max(q.pitch, p.extent.width);
  const std::size_t slice = pitch * std::max<std::size_t>(q.ysize, height);
  return at.x + (at.y + height - 1) * pitch + (at.z + depth - 1) * slice + p.extent.width;
}

CUGRAPHS_INLINE std::optional<ArgumentSites::HostSource> ArgumentSites::host_source(const cudaMemcpy3DParms& p) {
  if (p.srcArray != nullptr || p.srcPtr.ptr == nullptr) return std::nullopt;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p.srcPtr.ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  if (attr.type != cudaMemoryTypeHost && attr.type != cudaMemoryTypeManaged) return std::nullopt;
  const std::size_t bytes = copy_extent(p, p.srcPtr, p.srcPos);
  if (bytes > kHostSearched) return HostSource{{}, bytes, false};
  const auto* first = static_cast<const std::byte*>(p.srcPtr.ptr);
  const std::size_t skip = std::min<std::size_t>((8 - reinterpret_cast<std::uintptr_t>(first) % 8) % 8, bytes);
  return HostSource{{first + skip, bytes - skip}, bytes, true};
}

CUGRAPHS_INLINE std::optional<std::string> ArgumentSites::draw_elsewhere(cudaGraphNode_t node, bool nested,
    const std::vector<ConditionalMade>& conditionals, std::string_view op) const {
  cudaGraphNodeType t{};
  if (cudaGraphNodeGetType(node, &t) != cudaSuccess) return "a node whose type CUDA cannot say";
  switch (t) {
    case cudaGraphNodeTypeKernel: {
      // A top-level kernel the runtime can read is judged by find(): here only the driver's.
      const auto bytes_of = kernel_param_bytes(node, nested);
      if (!bytes_of) return std::string("a kernel node whose arguments CUDA cannot read (which might hold a draw)");
      if (std::ranges::any_of(bytes_of->spans(), [this](std::span<const std::byte> b) { return holds_draw(b); }))
        return std::string(nested ? "a kernel inside a conditional body or a child graph takes the PhiloxArgs of a "
                                    "draw"
                                  : "a kernel that this CUDA runtime cannot name (launched through the driver API "
                                    "or by another library) takes the PhiloxArgs of a draw");
      return std::nullopt;
    }
    case cudaGraphNodeTypeMemcpy: {
      // PhiloxArgs copied from pinned or managed memory, as the host holds them now, which
      // only the ring refreshes.
      cudaMemcpy3DParms p{};
      if (cudaGraphMemcpyNodeGetParams(node, &p) != cudaSuccess) return std::nullopt;
      const auto host = host_source(p);
      if (!host) return std::nullopt;
      if (!host->searched)
        return format("a memcpy node copies {} bytes from host memory, more than cugraphs searches for a draw's "
                      "PhiloxArgs (64 MiB)",
                      host->bytes);
      std::optional<DrawMade> found;
      (void)each_draw(host->words, [&](std::size_t, DrawMade d) {
        found = d;
        return true;
      });
      if (found)
        return format("a memcpy node copies the PhiloxArgs of a draw (generator {} of the graph, offset {}) from "
                      "host memory",
                      found->generator, found->offset);
      return std::nullopt;
    }
    case cudaGraphNodeTypeGraph:
#if CUGRAPHS_HAS_CONDITIONAL_NODES
    case cudaGraphNodeTypeConditional:
#endif
      return first_nested(node, t, conditionals, op, "", [&, this](cudaGraphNode_t n) {
        return draw_elsewhere(n, true, conditionals, op);
      });
    default:
      return std::nullopt;
  }
}

CUGRAPHS_INLINE void ArgumentSites::set_node(cudaGraphExec_t exec, PatchedNode& n, Taken taken, std::string_view op) {
  if (!write_values(n, taken) && n.current) return;
  n.current = false;
  if (const cudaError_t e = set_exec_kernel_node(exec, n.target, n.args.launch(), n.function); e != cudaSuccess)
    [[unlikely]]
    throw_cuda(e, format("{}: handing a launch its values (cudaGraphExecKernelNodeSetParams)", op));
  n.current = true;
}

CUGRAPHS_INLINE bool ArgumentSites::write_values(PatchedNode& n, Taken taken) noexcept {
  bool changed = false;
  if (!taken.empty())
    for (const auto& site : n.draws) {
      const auto [seed, offset] = taken[site.draw.generator];
      changed |= n.args.update_word(site.at, seed);
      changed |= n.args.update_word(site.at + 8, offset + site.draw.offset);
      changed |= n.args.update_word(site.at + 16, 0);  // rng::unpack takes the numbers themselves
    }
  if (n.stage && rec_.leaves != 0)
    changed |= n.args.update_bytes(*n.stage + offsetof(StageArgs, inline_sources),
                                   rec_.in_place ? stage_sources_.data() : committed_.data(),
                                   rec_.leaves * sizeof(unsigned long long));
  // Read in place, a leaf's address is the input's (0: the static input itself); copied, the
  // static input's, as captured.
  for (const auto& site : n.leaves) {
    const std::uint64_t input = stage_sources_[site.leaf] != 0 ? 0 : committed_[site.leaf];
    const auto base = input != 0 ? input : reinterpret_cast<std::uintptr_t>(rec_.statics[site.leaf].dst);
    changed |= n.args.update_word(site.at, base + site.delta);
  }
  return changed;
}

CUGRAPHS_INLINE std::shared_ptr<CUevent_st> new_event(std::string_view op) {
  RelaxedCaptureMode relaxed;  // a capture may be open on this thread
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "{}: cudaEventCreateWithFlags", op);
  return {e, [](cudaEvent_t ev) {
            RelaxedCaptureMode r;
            report_in_destructor(cudaEventDestroy(ev), "cudaEventDestroy (per-launch values)");
          }};
}

CUGRAPHS_INLINE std::shared_ptr<CUevent_st> add_end_event(cudaGraph_t g, std::span<const cudaGraphNode_t> after,
                                                         std::string_view op) {
  auto event = new_event(op);
  RelaxedCaptureMode relaxed;  // a capture may be open on this thread
  cudaGraphNode_t node = nullptr;
  check(cudaGraphAddEventRecordNode(&node, g, after.data(), after.size(), event.get()),
        "{}: cudaGraphAddEventRecordNode (the end of a launch)", op);
  return event;
}

CUGRAPHS_INLINE void wait_end_event(cudaEvent_t e, std::string_view op) noexcept {
  if (e == nullptr) return;
  RelaxedCaptureMode relaxed;  // a capture open on this thread must go on
  if (const cudaError_t r = cudaEventSynchronize(e); r != cudaSuccess) {
    (void)cudaGetLastError();
    report_in_destructor(r, op);
  }
}

CUGRAPHS_INLINE void append_words(std::span<const std::byte> bytes, std::vector<std::uint64_t>& out) {
  for (std::size_t at = 0; at + 8 <= bytes.size(); at += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, bytes.data() + at, sizeof w);
    out.push_back(w);
  }
}

CUGRAPHS_INLINE void argument_words(void* const* args, std::span<const KernelArgs::Param> params,
                                    std::vector<std::uint64_t>& out) {
  for (std::size_t i = 0; i < params.size(); ++i)
    append_words({static_cast<const std::byte*>(args[i]), params[i].size}, out);
}

namespace argument_sites_detail {

// The 8-byte words of kernel nodes' arguments, each kernel's layout asked once (ArgumentReader).
class KernelWords {
public:
  void append(cudaGraphNode_t n, std::vector<std::uint64_t>& words) {
    if (reader_.read(n, params_))
      for (const auto bytes : params_) append_words(bytes, words);
  }

private:
  ArgumentReader reader_;
  std::vector<std::span<const std::byte>> params_;
};

}  // namespace argument_sites_detail

CUGRAPHS_INLINE std::vector<cudaGraphNode_t> nodes_writing(cudaGraph_t g, std::uintptr_t from, std::uintptr_t to) {
  std::vector<cudaGraphNode_t> out;
  RelaxedCaptureMode relaxed;  // queries, but a capture may be open on this thread
  argument_sites_detail::KernelWords kernels;
  std::vector<std::uint64_t> words;
  std::vector<cudaGraphNode_t> nodes;
  CUGRAPHS_TRY {
    nodes = graph_nodes(g, "nodes_writing");
  } CUGRAPHS_CATCH_ALL {
    (void)cudaGetLastError();
    return out;
  }
  for (cudaGraphNode_t n : nodes) {
    words.clear();
    cudaGraphNodeType t{};
    if (cudaGraphNodeGetType(n, &t) != cudaSuccess) continue;
    if (t == cudaGraphNodeTypeKernel) {
      kernels.append(n, words);
    } else if (cudaMemcpy3DParms c{}; t == cudaGraphNodeTypeMemcpy) {
      if (cudaGraphMemcpyNodeGetParams(n, &c) == cudaSuccess && c.dstArray == nullptr)
        words.push_back(reinterpret_cast<std::uintptr_t>(c.dstPtr.ptr));
    } else if (cudaMemsetParams m{}; t == cudaGraphNodeTypeMemset) {
      if (cudaGraphMemsetNodeGetParams(n, &m) == cudaSuccess) words.push_back(reinterpret_cast<std::uintptr_t>(m.dst));
    }
    if (std::ranges::any_of(words, [&](std::uint64_t w) { return w >= from && w < to; })) out.push_back(n);
  }
  (void)cudaGetLastError();  // a query's own error
  return out;
}

CUGRAPHS_INLINE std::vector<NamedBuffer> named_buffers(cudaGraph_t g,
    const std::vector<ConditionalMade>& conditionals, std::string_view op) {
  std::vector<NamedBuffer> named, nested;
  BufferRegistry& registry = BufferRegistry::instance();
  if (registry.empty()) return named;
  RelaxedCaptureMode relaxed;  // queries, but a capture may be open on this thread
  argument_sites_detail::KernelWords kernels;
  std::vector<std::uint64_t> words;
  const auto kernel_words = [&](cudaGraphNode_t n) { kernels.append(n, words); };
  const auto copy_words = [&](const cudaMemcpy3DParms& p) {
    if (p.srcArray == nullptr) words.push_back(reinterpret_cast<std::uintptr_t>(p.srcPtr.ptr));
    if (p.dstArray == nullptr) words.push_back(reinterpret_cast<std::uintptr_t>(p.dstPtr.ptr));
    return true;
  };
  const auto set_words = [&](const cudaMemsetParams& p) { words.push_back(reinterpret_cast<std::uintptr_t>(p.dst)); };
  const auto nested_kernel = [&](std::span<const std::span<const std::byte>> params) {
    for (const auto bytes : params) append_words(bytes, words);
    return true;
  };
  const auto nodes = graph_nodes(g, op);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    words.clear();
    std::size_t node = i;
    cudaGraphNodeType t{};
    if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess) continue;
    if (t == cudaGraphNodeTypeKernel) {
      kernel_words(nodes[i]);
    } else if (cudaMemcpy3DParms c{}; t == cudaGraphNodeTypeMemcpy) {
      if (cudaGraphMemcpyNodeGetParams(nodes[i], &c) == cudaSuccess) copy_words(c);
    } else if (cudaMemsetParams m{}; t == cudaGraphNodeTypeMemset) {
      if (cudaGraphMemsetNodeGetParams(nodes[i], &m) == cudaSuccess) set_words(m);
    } else if (cudaGraph_t child = nullptr; t == cudaGraphNodeTypeGraph) {
      // What the walk reads before a node it cannot read still counts.
      node = NamedBuffer::kNested;
      if (cudaGraphChildGraphNodeGetGraph(nodes[i], &child) == cudaSuccess)
        (void)walk_nodes(child, conditionals, op, nested_kernel, copy_words, set_words);
    }
#if CUGRAPHS_HAS_CONDITIONAL_NODES
    else if (t == cudaGraphNodeTypeConditional) {
      node = NamedBuffer::kNested;
      if (const auto made = std::ranges::find(conditionals, nodes[i], &ConditionalMade::node); made != conditionals.end())
        for (cudaGraph_t body : made->bodies)
          (void)walk_nodes(body, conditionals, op, nested_kernel, copy_words, set_words);
    }
#endif
    if (!words.empty()) registry.name(words, node, node == NamedBuffer::kNested ? nested : named);
  }
  (void)cudaGetLastError();  // a query's own error
  named.insert(named.end(), nested.begin(), nested.end());  // in node order, nested last
  return named;
}

}  // namespace cugraphs::detail
