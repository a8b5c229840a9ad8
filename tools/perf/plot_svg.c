/*
 * --plot FILE.svg: bandwidth and latency against data size, log-log, as one self-contained SVG.
 *
 * Written by hand so the tools need nothing but libc: two stacked panels (bandwidth in GB/s with
 * the algorithm and bus series; latency in microseconds), sizes on a base-2 axis labelled 1K, 1M,
 * ..., values on a base-10 axis labelled by decade. Points that a log axis cannot show (a zero size
 * or a zero time) are left out rather than clamped, so the chart never draws a value that was not
 * measured. The file starts with "<svg" (no XML declaration) so browsers and xmllint both take it.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "perf.h"

#define SVG_WIDTH 900.0
#define PANEL_HEIGHT 360.0
#define TITLE_HEIGHT 40.0
#define MARGIN_LEFT 80.0
#define MARGIN_RIGHT 170.0
#define MARGIN_TOP 30.0
#define MARGIN_BOTTOM 50.0
#define MAX_X_TICKS 12

/* A panel's plot area and its axes' ranges, as exponents (base 2 for x, base 10 for y). */
typedef struct {
    double left, top, width, height;
    double x_lo, x_hi;  /* log2 of bytes */
    double y_lo, y_hi;  /* log10 of the value */
} panel_t;

/* One line of a panel: which field of the rows, and how it looks. */
typedef struct {
    const char *label;
    const char *color;
    const char *dash;  /* stroke-dasharray: bus bandwidth equals algorithm bandwidth on 2 ranks
                        * for all_reduce and on any count for factor-1 collectives, and a dashed
                        * line on top keeps both visible */
    double (*value)(const hc_perf_row_t *row);
} series_t;

static double alg_bw(const hc_perf_row_t *row)
{
    return row->alg_bw_gbs;
}

static double bus_bw(const hc_perf_row_t *row)
{
    return row->bus_bw_gbs;
}

static double latency(const hc_perf_row_t *row)
{
    return row->avg_time_us;
}

static const series_t bandwidth_series[] = {
    {.label = "alg_bandwidth", .color = "#1f77b4", .dash = "none", .value = alg_bw},
    {.label = "bus_bandwidth", .color = "#ff7f0e", .dash = "6 4", .value = bus_bw},
};

static const series_t latency_series[] = {
    {.label = "aveg_time", .color = "#2ca02c", .dash = "none", .value = latency},
};

static void xml_text(FILE *out, const char *text)
{
    for (; *text != '\0'; text++) {
        if (*text == '<')
            fputs("&lt;", out);
        else if (*text == '>')
            fputs("&gt;", out);
        else if (*text == '&')
            fputs("&amp;", out);
        else
            fputc(*text, out);
    }
}

static double map_x(const panel_t *p, double bytes)
{
    return p->left + (log2(bytes) - p->x_lo) / (p->x_hi - p->x_lo) * p->width;
}

static double map_y(const panel_t *p, double value)
{
    return p->top + p->height - (log10(value) - p->y_lo) / (p->y_hi - p->y_lo) * p->height;
}

/* 1K, 64K, 1M, 2G: sizes as hccl_test's flags write them. */
static void size_label(double bytes, char *text, size_t len)
{
    static const char units[] = " KMGTP";
    int unit = 0;

    while (bytes >= 1024.0 && unit < 5) {
        bytes /= 1024.0;
        unit++;
    }
    if (unit == 0)
        snprintf(text, len, "%g", bytes);
    else
        snprintf(text, len, "%g%c", bytes, units[unit]);
}

/* Whole exponents around the data, widened so that a single point still gets an axis. */
static void axis_range(double lo, double hi, double (*log_fn)(double), double *lo_p, double *hi_p)
{
    double a = floor(log_fn(lo)), b = ceil(log_fn(hi));

    if (b <= a) {
        a -= 1.0;
        b += 1.0;
    }
    *lo_p = a;
    *hi_p = b;
}

/* The range of the points that the panel can show: 0 when there are none. */
static int data_range(const hc_perf_row_t *rows, size_t nrows, const series_t *series, size_t nseries,
                      double range_p[4])
{
    int found = 0;

    for (size_t i = 0; i < nrows; i++) {
        for (size_t s = 0; s < nseries; s++) {
            double x = (double)rows[i].data_bytes, y = series[s].value(&rows[i]);
            if (!(x > 0.0) || !(y > 0.0) || !isfinite(y))
                continue;
            if (!found || x < range_p[0])
                range_p[0] = x;
            if (!found || x > range_p[1])
                range_p[1] = x;
            if (!found || y < range_p[2])
                range_p[2] = y;
            if (!found || y > range_p[3])
                range_p[3] = y;
            found = 1;
        }
    }
    return found;
}

static void draw_x_axis(FILE *out, const panel_t *p)
{
    int first = (int)p->x_lo, last = (int)p->x_hi;
    int step = (last - first + MAX_X_TICKS - 1) / MAX_X_TICKS;
    double bottom = p->top + p->height;
    char label[32];

    if (step < 1)
        step = 1;
    for (int e = first; e <= last; e += step) {
        double x = map_x(p, ldexp(1.0, e));
        size_label(ldexp(1.0, e), label, sizeof(label));
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x, p->top, x, bottom);
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x, bottom + 16.0, label);
    }
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">data_size (bytes)</text>\n",
            p->left + p->width / 2.0, bottom + 36.0);
}

static void draw_y_axis(FILE *out, const panel_t *p, const char *title)
{
    for (int e = (int)p->y_lo; e <= (int)p->y_hi; e++) {
        double y = map_y(p, pow(10.0, e));
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", p->left, y,
                p->left + p->width, y);
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", p->left - 6.0, y + 4.0,
                pow(10.0, e));
    }
    fprintf(out, "<text transform=\"translate(%.1f %.1f) rotate(-90)\" text-anchor=\"middle\">%s</text>\n",
            p->left - 60.0, p->top + p->height / 2.0, title);
}

static void draw_series(FILE *out, const panel_t *p, const hc_perf_row_t *rows, size_t nrows, const series_t *s,
                        size_t index)
{
    double legend_y = p->top + 20.0 + 20.0 * (double)index;

    fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"%s\" points=\"",
            s->color, s->dash);
    for (size_t i = 0; i < nrows; i++) {
        double x = (double)rows[i].data_bytes, y = s->value(&rows[i]);
        if (x > 0.0 && y > 0.0 && isfinite(y))
            fprintf(out, "%.1f,%.1f ", map_x(p, x), map_y(p, y));
    }
    fprintf(out, "\"/>\n");
    for (size_t i = 0; i < nrows; i++) {
        double x = (double)rows[i].data_bytes, y = s->value(&rows[i]);
        if (x > 0.0 && y > 0.0 && isfinite(y))
            fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", map_x(p, x), map_y(p, y), s->color);
    }
    fprintf(out,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\" "
            "stroke-dasharray=\"%s\"/>\n",
            p->left + p->width + 15.0, legend_y, p->left + p->width + 40.0, legend_y, s->color, s->dash);
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", p->left + p->width + 46.0, legend_y + 4.0, s->label);
}

/* One panel at vertical offset top: frame, axes, series; a note instead when nothing is plottable. */
static void draw_panel(FILE *out, double top, const char *title, const hc_perf_row_t *rows, size_t nrows,
                       const series_t *series, size_t nseries)
{
    panel_t p = {.left = MARGIN_LEFT, .top = top + MARGIN_TOP, .width = SVG_WIDTH - MARGIN_LEFT - MARGIN_RIGHT,
                 .height = PANEL_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM};
    double range[4] = {0.0, 0.0, 0.0, 0.0};

    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
            p.left, p.top, p.width, p.height);
    if (!data_range(rows, nrows, series, nseries, range)) {
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s: no positive values to plot</text>\n",
                p.left + p.width / 2.0, p.top + p.height / 2.0, title);
        return;
    }
    axis_range(range[0], range[1], log2, &p.x_lo, &p.x_hi);
    axis_range(range[2], range[3], log10, &p.y_lo, &p.y_hi);
    draw_x_axis(out, &p);
    draw_y_axis(out, &p, title);
    for (size_t s = 0; s < nseries; s++)
        draw_series(out, &p, rows, nrows, &series[s], s);
}

int hc_perf_write_svg(const char *path, const hc_perf_report_t *report, const hc_perf_row_t *rows, size_t nrows)
{
    double height = TITLE_HEIGHT + 2.0 * PANEL_HEIGHT;
    FILE *out = fopen(path, "w");
    char title[160];
    int write_error;

    if (out == NULL) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    snprintf(title, sizeof(title), "%s_test: %u ranks, %s%s%s, %u iterations", report->coll->name, report->nranks,
             report->opts->dtype->name, report->coll->reduces ? ", " : "",
             report->coll->reduces ? hc_perf_op_name(report->opts->op) : "", report->opts->iters);
    fprintf(out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n<title>",
            SVG_WIDTH, height, SVG_WIDTH, height);
    xml_text(out, title);
    fprintf(out, "</title>\n<rect width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", SVG_WIDTH, height);
    fprintf(out, "<text x=\"%.1f\" y=\"26\" text-anchor=\"middle\" font-size=\"16\">", SVG_WIDTH / 2.0);
    xml_text(out, title);
    fprintf(out, "</text>\n");
    draw_panel(out, TITLE_HEIGHT, "bandwidth (GB/s)", rows, nrows, bandwidth_series, 2);
    draw_panel(out, TITLE_HEIGHT + PANEL_HEIGHT, "latency (us)", rows, nrows, latency_series, 1);
    fprintf(out, "</svg>\n");
    write_error = ferror(out);
    if (fclose(out) != 0 || write_error) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}
