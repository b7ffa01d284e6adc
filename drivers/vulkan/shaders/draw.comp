// SoftCommand::Draw on the GPU: word i of the render target becomes
// (v[i % v_count] * c[0] + c[1] * i + c[2]) ^ c[3], wrapping 32-bit arithmetic, the vertex 0
// when there is none (cmdlist::soft::draw_word). Whole buffers are bound; the push
// constants give the word offsets of the constants, the vertices and the target.
// Compiled with `glslangValidator -V draw.comp -o draw.spv`.
#version 450

layout(local_size_x = 64) in;

layout(set = 0, binding = 0, std430) readonly buffer Constants { uint c[]; };
layout(set = 0, binding = 1, std430) readonly buffer Vertices { uint v[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Target { uint o[]; };

layout(push_constant) uniform Push {
    uint c_at;    // first word of the constants
    uint v_at;    // first word of the vertices
    uint v_count; // vertex words
    uint o_at;    // first word of the target
    uint first;   // index of this dispatch's first target word
    uint count;   // target words this dispatch writes
} p;

void main() {
    uint g = gl_GlobalInvocationID.x;
    if (g >= p.count) {
        return;
    }
    uint i = p.first + g;
    uint vertex = p.v_count == 0u ? 0u : v[p.v_at + i % p.v_count];
    o[p.o_at + i] = (vertex * c[p.c_at] + c[p.c_at + 1u] * i + c[p.c_at + 2u]) ^ c[p.c_at + 3u];
}
