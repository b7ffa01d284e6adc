// The DXGI Blt (R-X6, R-X7) on the GPU for the 32-bit RGBA8 family, single-sampled source,
// no rotation: each invocation writes one pixel of the destination rectangle, sampling the
// source rectangle with cmdlist::dxgi::reference's bilinear filter (integer tap positions,
// clamped to the rectangle; the two source rows blended first, then along the row) in the
// working domain the reference picks: linear light (sRGB decode, then encode) for an _SRGB
// source whose Blt blends texels, the normalised codes otherwise. Rows are tightly packed.
// Compiled with `glslangValidator -V blt.comp -o blt.spv`.
#version 450

layout(local_size_x = 8, local_size_y = 8) in;

layout(set = 0, binding = 0, std430) readonly buffer Src { uint s[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Dst { uint d[]; };

// Formats: 0 R8G8B8A8, 1 B8G8R8A8, 2 B8G8R8X8 (alpha reads 1, the X byte is written 0xFF).
layout(push_constant) uniform Push {
    uint src_at;  // first word of the source subresource
    uint src_w;   // its width (pixels per row)
    uint sl;      // source rectangle: left, top, width, height
    uint st;
    uint sw;
    uint sh;
    uint dst_at;  // first word of the destination subresource
    uint dst_w;
    uint dl;      // destination rectangle: left, top, width, height
    uint dt;
    uint dw;
    uint dh;
    uint src_fmt;
    uint dst_fmt;
    uint linear;  // 1: filter in linear light (an _SRGB source, texels blended)
} p;

// Destination index k of n over m source indices: the taps i0, i1 and the weight of i1.
void tap(uint k, uint n, uint m, out uint i0, out uint i1, out float w) {
    int pos = int((2u * k + 1u) * m) - int(n);
    int q = int(2u * n);
    int t0 = pos >= 0 ? pos / q : -((q - 1 - pos) / q);
    int frac = pos - t0 * q;
    int last = int(m) - 1;
    i0 = uint(clamp(t0, 0, last));
    i1 = uint(clamp(t0 + 1, 0, last));
    w = (frac == 0 || i0 == i1) ? 0.0 : float(frac) / float(q);
}

float decode(float c) {
    return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4);
}

float encode(float c) {
    c = clamp(c, 0.0, 1.0);
    return c <= 0.0031308 ? 12.92 * c : 1.055 * pow(c, 1.0 / 2.4) - 0.055;
}

vec4 fetch(uint row, uint col) {
    uint w = s[p.src_at + (p.st + row) * p.src_w + p.sl + col];
    vec4 b = vec4(float(w & 255u), float((w >> 8) & 255u), float((w >> 16) & 255u),
                  float(w >> 24)) / 255.0;
    vec4 c = p.src_fmt == 0u ? b : b.zyxw;
    if (p.src_fmt == 2u) {
        c.a = 1.0;
    }
    if (p.linear == 1u) {
        c.rgb = vec3(decode(c.r), decode(c.g), decode(c.b));
    }
    return c;
}

// (1 - w) a + w b, written a + w (b - a), equal neighbours giving exactly their value.
vec4 lerp4(vec4 a, vec4 b, float w) {
    return mix(a + w * (b - a), a, equal(a, b));
}

uint quantise(float c) {
    return uint(min(floor(clamp(c, 0.0, 1.0) * 255.0 + 0.5), 255.0));
}

void main() {
    uvec2 g = gl_GlobalInvocationID.xy;
    if (g.x >= p.dw || g.y >= p.dh) {
        return;
    }
    uint c0, c1, r0, r1;
    float wx, wy;
    tap(g.x, p.dw, p.sw, c0, c1, wx);
    tap(g.y, p.dh, p.sh, r0, r1, wy);
    vec4 a = fetch(r0, c0);
    vec4 b = wx == 0.0 ? a : fetch(r0, c1);
    if (wy != 0.0) {
        a = lerp4(a, fetch(r1, c0), wy);
        b = wx == 0.0 ? a : lerp4(b, fetch(r1, c1), wy);
    }
    vec4 v = wx == 0.0 ? a : lerp4(a, b, wx);
    if (p.linear == 1u) {
        v.rgb = vec3(encode(v.r), encode(v.g), encode(v.b));
    }
    uvec4 q = uvec4(quantise(v.r), quantise(v.g), quantise(v.b), quantise(v.a));
    if (p.dst_fmt == 2u) {
        q.a = 255u;
    }
    uvec4 bytes = p.dst_fmt == 0u ? q : q.zyxw;
    d[p.dst_at + (p.dt + g.y) * p.dst_w + p.dl + g.x] =
        bytes.x | (bytes.y << 8) | (bytes.z << 16) | (bytes.w << 24);
}
