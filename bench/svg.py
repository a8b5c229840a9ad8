"""Bandwidth-against-size plots as plain SVG text (no matplotlib): log2 size axis labelled 8, 1K,
1M, ..., log10 bandwidth axis labelled by decade, one polyline per implementation. Points a log axis
cannot show (no measurement, zero time) are left out, never clamped."""

import math
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 900, 480
LEFT, RIGHT, TOP, BOTTOM = 80, 190, 50, 60

# Fixed colours, so an implementation looks the same in every plot.
STYLES = {
    "hostccl malloc": ("#d62728", "none"),
    "hostccl acl": ("#ff7f0e", "3 3"),
    "hostccl fp16": ("#ff9896", "none"),
    "hostccl bf16": ("#8c564b", "none"),
    "Open MPI": ("#1f77b4", "none"),
    "MPICH": ("#2ca02c", "none"),
    "Gloo": ("#9467bd", "none"),
    "memcpy": ("#7f7f7f", "6 4"),
}


def size_label(nbytes):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return "%d%s" % (nbytes >> shift, unit)
    return str(nbytes)


def _decade_label(exp):
    value = 10.0 ** exp
    return ("%g" % value) if -3 <= exp <= 3 else "1e%d" % exp


def plot(path, title, series):
    """series: list of (name, [(bytes, GB/s), ...]). Writes a self-contained SVG file."""
    points = [(b, v) for _, pts in series for b, v in pts if b > 0 and v > 0]
    if not points:
        return False
    x_lo = math.floor(math.log2(min(b for b, _ in points)))
    x_hi = math.ceil(math.log2(max(b for b, _ in points)))
    y_lo = math.floor(math.log10(min(v for _, v in points)))
    y_hi = math.ceil(math.log10(max(v for _, v in points)))
    x_hi = max(x_hi, x_lo + 1)
    y_hi = max(y_hi, y_lo + 1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(nbytes):
        return LEFT + (math.log2(nbytes) - x_lo) / (x_hi - x_lo) * plot_w

    def py(value):
        return TOP + plot_h - (math.log10(value) - y_lo) / (y_hi - y_lo) * plot_h

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="sans-serif" font-size="12">' % (WIDTH, HEIGHT, WIDTH, HEIGHT),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="28" font-size="16">%s</text>' % (LEFT, escape(title))]
    step = 2 if x_hi - x_lo > 14 else 1
    for exp in range(x_lo, x_hi + 1, step):
        x = px(2.0 ** exp)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (x, TOP, x, TOP + plot_h))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (x, TOP + plot_h + 18, size_label(2 ** exp)))
    for exp in range(y_lo, y_hi + 1):
        y = py(10.0 ** exp)
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (LEFT, y, LEFT + plot_w, y))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (LEFT - 6, y + 4, _decade_label(exp)))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>'
               % (LEFT, TOP, plot_w, plot_h))
    out.append('<text x="%d" y="%d" text-anchor="middle">data_size (bytes)</text>'
               % (LEFT + plot_w // 2, HEIGHT - 15))
    out.append('<text transform="translate(20,%d) rotate(-90)" text-anchor="middle">'
               'algorithm bandwidth (GB/s)</text>' % (TOP + plot_h // 2))
    index = 0
    for name, pts in series:
        color, dash = STYLES.get(name, ("#17becf", "none"))
        shown = sorted((b, v) for b, v in pts if b > 0 and v > 0)
        if not shown:
            continue
        coords = " ".join("%.1f,%.1f" % (px(b), py(v)) for b, v in shown)
        out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>'
                   % (coords, color, dash))
        for b, v in shown:
            out.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>' % (px(b), py(v), color))
        ly = TOP + 10 + index * 20
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>'
                   % (LEFT + plot_w + 15, ly, LEFT + plot_w + 45, ly, color, dash))
        out.append('<text x="%d" y="%d">%s</text>' % (LEFT + plot_w + 52, ly + 4, escape(name)))
        index += 1
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return True
